//! Generated text as it streams: token pieces (bytes) become text only once they form whole
//! UTF-8 characters, and text that may be the start of a stop string is held back until it is
//! known not to be one. Stop strings match across token boundaries.

/// The text of one generation so far.
#[derive(Default, Debug)]
pub struct TextStream {
    /// Bytes of an unfinished UTF-8 character.
    pending: Vec<u8>,
    text: String,
    /// Bytes of `text` already handed out by `take_delta`.
    sent: usize,
    stop: Vec<String>,
    stopped: bool,
    /// The stop string found (its index in `stop`).
    matched: Option<usize>,
}

impl TextStream {
    pub fn new(stop: &[String]) -> TextStream {
        TextStream { stop: stop.to_vec(), ..Default::default() }
    }

    /// Appends a token's piece; true when the text now contains a stop string (the text is then
    /// cut just before it and nothing more is accepted).
    pub fn push(&mut self, piece: &[u8]) -> bool {
        if self.stopped {
            return true;
        }
        self.pending.extend_from_slice(piece);
        let search_from = self.text.len().saturating_sub(self.stop.iter().map(|s| s.len()).max().unwrap_or(0));
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    self.text.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let ok = e.valid_up_to();
                    // SAFETY-free: the prefix was just validated
                    self.text.push_str(std::str::from_utf8(&self.pending[..ok]).unwrap_or_default());
                    match e.error_len() {
                        None => {
                            self.pending.drain(..ok);
                            break;
                        }
                        Some(bad) => {
                            self.text.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..ok + bad);
                        }
                    }
                }
            }
        }
        let start = floor_char_boundary(&self.text, search_from);
        // the earliest in the text; at one place, the first of the list (llama-server's pick)
        let hit = self.stop.iter().enumerate().filter_map(|(k, s)| self.text[start..].find(s.as_str()).map(|i| (start + i, k))).min();
        if let Some((i, k)) = hit {
            self.matched = Some(k);
            self.text.truncate(i);
            self.pending.clear();
            self.stopped = true;
        }
        self.stopped
    }

    /// The stop string that ended the text, if one did.
    pub fn stop_word(&self) -> Option<&str> {
        self.matched.map(|k| self.stop[k].as_str())
    }

    /// The whole text so far (stop string excluded, unfinished characters not yet included).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Text not handed out yet that cannot be part of a stop string any more.
    pub fn take_delta(&mut self) -> String {
        let mut end = self.text.len();
        if !self.stopped {
            // hold back the longest suffix that is a proper prefix of a stop string
            for s in &self.stop {
                for k in (1..s.len()).rev() {
                    if s.is_char_boundary(k) && self.text.ends_with(&s[..k]) {
                        end = end.min(self.text.len() - k);
                        break;
                    }
                }
            }
        }
        let end = end.max(self.sent);
        let d = self.text[self.sent..end].to_string();
        self.sent = end;
        d
    }

    /// Ends the stream: unfinished bytes become U+FFFD, nothing is held back any more.
    pub fn finish(&mut self) -> String {
        if !self.pending.is_empty() {
            self.text.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
        self.stopped = true;
        self.take_delta()
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multibyte_characters_wait_for_their_last_byte() {
        let mut t = TextStream::new(&[]);
        let e = "é".as_bytes();
        t.push(b"caf");
        t.push(&e[..1]);
        assert_eq!(t.take_delta(), "caf");
        t.push(&e[1..]);
        assert_eq!(t.take_delta(), "é");
        t.push(&[0xff, b'x']);
        assert_eq!(t.take_delta(), "\u{fffd}x");
    }

    #[test]
    fn stop_strings_match_across_pieces_and_are_held_back() {
        let mut t = TextStream::new(&["</end>".to_string()]);
        assert!(!t.push(b"hello </"));
        assert_eq!(t.take_delta(), "hello ");
        assert!(!t.push(b"en"));
        assert_eq!(t.take_delta(), "");
        assert!(t.push(b"d> more"));
        assert_eq!(t.text(), "hello ");
        assert_eq!(t.finish(), "");
        assert_eq!(t.stop_word(), Some("</end>"));
    }

    #[test]
    fn the_stop_word_is_the_earliest_then_the_first_listed() {
        let stops = ["lo".to_string(), "ell".to_string(), "el".to_string()];
        let mut t = TextStream::new(&stops);
        assert_eq!(t.stop_word(), None);
        assert!(t.push(b"hello"));
        assert_eq!((t.text(), t.stop_word()), ("h", Some("ell")));
        let mut t = TextStream::new(&stops);
        t.push(b"a");
        t.finish();
        assert_eq!(t.stop_word(), None);
    }

    #[test]
    fn a_false_start_is_released() {
        let mut t = TextStream::new(&["ab".to_string()]);
        t.push(b"xa");
        assert_eq!(t.take_delta(), "x");
        t.push(b"c");
        assert_eq!(t.take_delta(), "ac");
        t.push(&[0xe6, 0x97]);
        assert_eq!(t.finish(), "\u{fffd}");
    }
}
