//! A backtracking matcher with an explicit stack: the program is tried in priority order
//! (alternatives left to right, greedy repetition longest first), which is how ECMAScript
//! `std::regex` picks its match. Lookaheads run as sub-programs at the current position.

use super::class::{word_char, Class};
use super::parse::Node;

#[derive(Clone, Copy, Debug)]
pub enum Inst {
    Set(u32),
    /// Try the first target, then the second.
    Split(u32, u32),
    Jmp(u32),
    Begin,
    End,
    WordBoundary(bool),
    Look { prog: u32, negate: bool },
    Match,
}

#[derive(Default)]
pub struct Program {
    pub insts: Vec<Inst>,
}

#[derive(Default)]
pub struct Compiled {
    pub classes: Vec<Class>,
    /// Program 0 is the expression; the others are its lookaheads.
    pub progs: Vec<Program>,
}

/// Steps one match attempt may take before giving up (a guard against pathological backtracking).
const STEP_LIMIT: usize = 1 << 24;

impl Compiled {
    pub fn new(node: &Node) -> Compiled {
        let mut c = Compiled::default();
        c.compile_prog(node);
        c
    }

    fn compile_prog(&mut self, node: &Node) -> u32 {
        let idx = self.progs.len();
        self.progs.push(Program::default());
        let mut insts = Vec::new();
        self.emit(node, &mut insts);
        insts.push(Inst::Match);
        self.progs[idx].insts = insts;
        idx as u32
    }

    fn emit(&mut self, node: &Node, out: &mut Vec<Inst>) {
        match node {
            Node::Empty => {}
            Node::Set(class) => {
                let i = match self.classes.iter().position(|c| c == class) {
                    Some(i) => i,
                    None => {
                        self.classes.push(class.clone());
                        self.classes.len() - 1
                    }
                };
                out.push(Inst::Set(i as u32));
            }
            Node::Seq(items) => {
                for n in items {
                    self.emit(n, out);
                }
            }
            Node::Alt(alts) => {
                // Split(a1, next); a1; Jmp end; next: Split(a2, ...) ...; an
                let mut jumps = Vec::new();
                for (k, a) in alts.iter().enumerate() {
                    if k + 1 < alts.len() {
                        let split = out.len();
                        out.push(Inst::Split(0, 0));
                        self.emit(a, out);
                        jumps.push(out.len());
                        out.push(Inst::Jmp(0));
                        let next = out.len() as u32;
                        out[split] = Inst::Split(split as u32 + 1, next);
                    } else {
                        self.emit(a, out);
                    }
                }
                let end = out.len() as u32;
                for j in jumps {
                    out[j] = Inst::Jmp(end);
                }
            }
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => {
                for _ in 0..*min {
                    self.emit(node, out);
                }
                let split = |body: u32, exit: u32| {
                    if *greedy {
                        Inst::Split(body, exit)
                    } else {
                        Inst::Split(exit, body)
                    }
                };
                match max {
                    None => {
                        let top = out.len();
                        out.push(Inst::Split(0, 0));
                        self.emit(node, out);
                        out.push(Inst::Jmp(top as u32));
                        let exit = out.len() as u32;
                        out[top] = split(top as u32 + 1, exit);
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(out.len());
                            out.push(Inst::Split(0, 0));
                            self.emit(node, out);
                        }
                        let exit = out.len() as u32;
                        for s in splits {
                            out[s] = split(s as u32 + 1, exit);
                        }
                    }
                }
            }
            Node::Look { node, negate } => {
                let prog = self.compile_prog(node);
                out.push(Inst::Look {
                    prog,
                    negate: *negate,
                });
            }
            Node::Begin => out.push(Inst::Begin),
            Node::End => out.push(Inst::End),
            Node::WordBoundary(b) => out.push(Inst::WordBoundary(*b)),
        }
    }

    /// Runs program `prog` at `at` over `text[ini..end]`; the end of the match, if any. With
    /// `not_null`, an empty match does not count.
    pub fn run(&self, prog: u32, text: &[u32], ini: usize, end: usize, at: usize, not_null: bool) -> Option<usize> {
        let insts = &self.progs[prog as usize].insts;
        let mut stack: Vec<(u32, usize)> = vec![(0, at)];
        let mut steps = 0usize;
        while let Some((mut pc, mut p)) = stack.pop() {
            loop {
                steps += 1;
                if steps > STEP_LIMIT {
                    return None;
                }
                match insts[pc as usize] {
                    Inst::Set(c) => {
                        if p < end && self.classes[c as usize].matches(text[p]) {
                            p += 1;
                            pc += 1;
                        } else {
                            break;
                        }
                    }
                    Inst::Split(a, b) => {
                        stack.push((b, p));
                        pc = a;
                    }
                    Inst::Jmp(a) => pc = a,
                    Inst::Begin => {
                        if p == ini {
                            pc += 1
                        } else {
                            break;
                        }
                    }
                    Inst::End => {
                        if p == end {
                            pc += 1
                        } else {
                            break;
                        }
                    }
                    Inst::WordBoundary(want) => {
                        let before = p > ini && word_char(text[p - 1]);
                        let after = p < end && word_char(text[p]);
                        if (before != after) == want {
                            pc += 1
                        } else {
                            break;
                        }
                    }
                    Inst::Look { prog, negate } => {
                        let hit = self.run(prog, text, ini, end, p, false).is_some();
                        if hit != negate {
                            pc += 1
                        } else {
                            break;
                        }
                    }
                    Inst::Match => {
                        if not_null && p == at {
                            break;
                        }
                        return Some(p);
                    }
                }
            }
        }
        None
    }
}
