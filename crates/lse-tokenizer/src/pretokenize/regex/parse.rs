//! A parser for the ECMAScript-flavoured expressions llama.cpp hands to `std::regex`: alternation,
//! groups (capturing or not, lookahead), greedy and lazy quantifiers, bracket expressions,
//! escapes and `\p{..}` categories (collapsed-text expressions only).

use super::class::{category_items, Class, Item};

#[derive(Clone, Debug)]
pub enum Node {
    Empty,
    Set(Class),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    Look {
        node: Box<Node>,
        negate: bool,
    },
    Begin,
    End,
    WordBoundary(bool),
}

pub struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    /// `\p{..}` allowed (the expression runs on collapsed text).
    collapsed: bool,
    _src: &'a str,
}

pub type Result<T> = std::result::Result<T, String>;

impl<'a> Parser<'a> {
    pub fn parse(src: &'a str, collapsed: bool) -> Result<Node> {
        let mut p = Parser {
            chars: src.chars().collect(),
            pos: 0,
            collapsed,
            _src: src,
        };
        let n = p.alternation()?;
        if p.pos != p.chars.len() {
            return Err(format!("unexpected '{}' at {}", p.chars[p.pos], p.pos));
        }
        Ok(n)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn alternation(&mut self) -> Result<Node> {
        let mut alts = vec![self.sequence()?];
        while self.eat('|') {
            alts.push(self.sequence()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Node::Alt(alts)
        })
    }

    fn sequence(&mut self) -> Result<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().unwrap(),
            _ => Node::Seq(items),
        })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while matches!(self.peek(), Some('0'..='9')) {
            self.pos += 1;
        }
        if start == self.pos {
            return None;
        }
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn quantified(&mut self, atom: Node) -> Result<Node> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let save = self.pos;
                self.pos += 1;
                let Some(lo) = self.number() else {
                    self.pos = save;
                    return Ok(atom);
                };
                let hi = if self.eat(',') {
                    self.number()
                } else {
                    Some(lo)
                };
                if !self.eat('}') {
                    return Err("bad repetition".into());
                }
                self.pos -= 1; // the '}' is consumed below like the other quantifiers
                (lo, hi)
            }
            _ => return Ok(atom),
        };
        self.pos += 1;
        let greedy = !self.eat('?');
        if matches!(atom, Node::Look { .. } | Node::Begin | Node::End | Node::WordBoundary(_)) {
            return Err("quantified assertion".into());
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    fn atom(&mut self) -> Result<Node> {
        let c = self.peek().ok_or("unexpected end")?;
        self.pos += 1;
        Ok(match c {
            '(' => {
                let look = if self.eat('?') {
                    match self.peek() {
                        Some(':') => {
                            self.pos += 1;
                            None
                        }
                        Some('=') => {
                            self.pos += 1;
                            Some(false)
                        }
                        Some('!') => {
                            self.pos += 1;
                            Some(true)
                        }
                        _ => return Err("unsupported group".into()),
                    }
                } else {
                    None
                };
                let inner = self.alternation()?;
                if !self.eat(')') {
                    return Err("missing ')'".into());
                }
                match look {
                    Some(negate) => Node::Look {
                        node: Box::new(inner),
                        negate,
                    },
                    None => inner,
                }
            }
            '[' => Node::Set(self.bracket()?),
            '.' => Node::Set(Class::single(
                vec![Item::Range(0x0A, 0x0A), Item::Range(0x0D, 0x0D)],
                true,
            )),
            '^' => Node::Begin,
            '$' => Node::End,
            '\\' => self.escape_atom()?,
            '*' | '+' | '?' => return Err(format!("nothing to repeat before '{c}'")),
            c => Node::Set(literal(c as u32)),
        })
    }

    fn escape_atom(&mut self) -> Result<Node> {
        let c = self.peek().ok_or("trailing backslash")?;
        match c {
            'b' => {
                self.pos += 1;
                Ok(Node::WordBoundary(true))
            }
            'B' => {
                self.pos += 1;
                Ok(Node::WordBoundary(false))
            }
            _ => {
                let items = self.escape_items()?;
                Ok(Node::Set(Class::single(items, false)))
            }
        }
    }

    /// An escape inside or outside brackets, as set items.
    fn escape_items(&mut self) -> Result<Vec<Item>> {
        let c = self.peek().ok_or("trailing backslash")?;
        self.pos += 1;
        let one = |x: u32| vec![Item::Range(x, x)];
        Ok(match c {
            's' => vec![Item::Space],
            'S' => vec![Item::NotSpace],
            'd' => vec![Item::Digit],
            'D' => vec![Item::NotDigit],
            'w' => vec![Item::Word],
            'W' => vec![Item::NotWord],
            'r' => one(0x0D),
            'n' => one(0x0A),
            't' => one(0x09),
            'f' => one(0x0C),
            'v' => one(0x0B),
            '0' => one(0),
            'x' => {
                let h: String = self.chars.get(self.pos..self.pos + 2).ok_or("bad \\x")?.iter().collect();
                self.pos += 2;
                one(u32::from_str_radix(&h, 16).map_err(|_| "bad \\x")?)
            }
            'p' if self.collapsed => {
                if !self.eat('{') {
                    return Err("bad \\p".into());
                }
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '}') {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                if !self.eat('}') {
                    return Err("bad \\p".into());
                }
                category_items(&name).ok_or_else(|| format!("unknown category {name}"))?
            }
            c if c.is_ascii_alphanumeric() => return Err(format!("unsupported escape \\{c}")),
            c => one(c as u32),
        })
    }

    fn bracket(&mut self) -> Result<Class> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("missing ']'")?;
            if c == ']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            // one endpoint: a literal, or an escape (which may stand for a whole set)
            let lo = if c == '\\' {
                self.pos += 1;
                let its = self.escape_items()?;
                match its.as_slice() {
                    [Item::Range(a, b)] if a == b => *a,
                    _ => {
                        items.extend(its);
                        continue;
                    }
                }
            } else {
                self.pos += 1;
                c as u32
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let hc = self.peek().ok_or("missing ']'")?;
                let hi = if hc == '\\' {
                    self.pos += 1;
                    match self.escape_items()?.as_slice() {
                        [Item::Range(a, b)] if a == b => *a,
                        _ => return Err("bad range".into()),
                    }
                } else {
                    self.pos += 1;
                    hc as u32
                };
                if hi < lo {
                    return Err("range out of order".into());
                }
                items.push(Item::Range(lo, hi));
            } else {
                items.push(Item::Range(lo, lo));
            }
        }
        Ok(Class::single(items, negated))
    }
}

fn literal(c: u32) -> Class {
    Class::single(vec![Item::Range(c, c)], false)
}
