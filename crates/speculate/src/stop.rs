//! Stop strings: a generation ends as soon as its decoded text contains one, and the text it
//! returns and streams stops before it. Text that could be the start of a stop string is held
//! back until the next tokens show that it is not, so a stream never shows part of one.

/// Most stop strings one generation may have.
pub const MAX_STOP_STRINGS: usize = 16;

/// Longest stop string, in bytes (it bounds the text held back and the work per token).
pub const MAX_STOP_BYTES: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    #[error("stop: {0} strings, more than the {MAX_STOP_STRINGS} a generation may have")]
    TooMany(usize),
    #[error("stop: string {0} is empty")]
    Empty(usize),
    #[error("stop: string {index} has {bytes} bytes, more than the {MAX_STOP_BYTES} allowed")]
    TooLong { index: usize, bytes: usize },
}

/// A checked list of stop strings (possibly empty: no stop strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopStrings(Vec<String>);

impl StopStrings {
    pub fn new(strings: Vec<String>) -> Result<Self, StopError> {
        if strings.len() > MAX_STOP_STRINGS {
            return Err(StopError::TooMany(strings.len()));
        }
        for (index, s) in strings.iter().enumerate() {
            if s.is_empty() {
                return Err(StopError::Empty(index));
            }
            if s.len() > MAX_STOP_BYTES {
                return Err(StopError::TooLong {
                    index,
                    bytes: s.len(),
                });
            }
        }
        Ok(StopStrings(strings))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn strings(&self) -> &[String] {
        &self.0
    }

    /// Byte offset of the earliest stop string in `text`.
    fn find(&self, text: &str) -> Option<usize> {
        self.0.iter().filter_map(|s| text.find(s.as_str())).min()
    }

    /// Where the shortest tail of `text` that is a proper prefix of a stop string starts
    /// (`text.len()` when none is): what must be held back.
    fn held_from(&self, text: &str) -> usize {
        let bytes = text.as_bytes();
        let longest = self.0.iter().map(String::len).max().unwrap_or(0);
        let first = bytes.len().saturating_sub(longest.saturating_sub(1));
        (first..bytes.len())
            .find(|&p| {
                let tail = &bytes[p..];
                self.0.iter().any(|s| s.as_bytes().starts_with(tail))
            })
            .unwrap_or(bytes.len())
    }
}

/// What [`StopMatcher::push`] lets through.
#[derive(Debug, PartialEq, Eq)]
pub struct Released {
    /// Text that is known not to be part of a stop string (before the stop string, on a match).
    pub text: String,
    /// A stop string is complete: the generation ends here.
    pub stopped: bool,
}

/// Watches a stream of decoded pieces for stop strings.
#[derive(Debug)]
pub struct StopMatcher<'a> {
    stops: &'a StopStrings,
    /// Received, not yet released.
    held: String,
    /// Released so far.
    text: String,
    stopped: bool,
}

impl<'a> StopMatcher<'a> {
    pub fn new(stops: &'a StopStrings) -> Self {
        StopMatcher {
            stops,
            held: String::new(),
            text: String::new(),
            stopped: false,
        }
    }

    /// Takes the next decoded piece; after a stop, everything is ignored.
    pub fn push(&mut self, piece: &str) -> Released {
        if self.stopped {
            return Released {
                text: String::new(),
                stopped: true,
            };
        }
        self.held.push_str(piece);
        let (release, stopped) = match self.stops.find(&self.held) {
            Some(at) => (at, true),
            None => (self.stops.held_from(&self.held), false),
        };
        let text: String = self.held[..release].to_owned();
        if stopped {
            self.held.clear();
        } else {
            self.held.drain(..release);
        }
        self.text.push_str(&text);
        self.stopped = stopped;
        Released { text, stopped }
    }

    /// Releases what is held back (the text ended without completing a stop string).
    pub fn flush(&mut self) -> String {
        let rest = std::mem::take(&mut self.held);
        self.text.push_str(&rest);
        rest
    }

    /// Everything released: the generation's text.
    pub fn into_text(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stops(s: &[&str]) -> StopStrings {
        StopStrings::new(s.iter().map(|s| s.to_string()).collect()).expect("valid")
    }

    /// Feeds `pieces`, returning what each push released and whether it stopped.
    fn run(stops: &StopStrings, pieces: &[&str]) -> (Vec<String>, bool, String) {
        let mut m = StopMatcher::new(stops);
        let mut out = Vec::new();
        let mut stopped = false;
        for p in pieces {
            let r = m.push(p);
            out.push(r.text);
            if r.stopped {
                stopped = true;
                break;
            }
        }
        if !stopped {
            out.push(m.flush());
        }
        (out, stopped, m.into_text())
    }

    #[test]
    fn a_stop_string_split_across_pieces_is_held_back_then_dropped() {
        let s = stops(&["\nUser:"]);
        let (out, stopped, text) = run(&s, &["Hello", " there\n", "Us", "er: hi"]);
        assert!(stopped);
        assert_eq!(out, ["Hello", " there", "", ""]);
        assert_eq!(text, "Hello there");
    }

    #[test]
    fn a_false_start_is_released_once_known() {
        let s = stops(&["END"]);
        let (out, stopped, text) = run(&s, &["a E", "N", "x b", " E"]);
        assert!(!stopped);
        assert_eq!(out, ["a ", "", "ENx b", " ", "E"]);
        assert_eq!(text, "a ENx b E");
    }

    #[test]
    fn the_earliest_of_several_stops_wins_and_text_before_it_is_kept() {
        let s = stops(&["world", "lo"]);
        let (out, stopped, text) = run(&s, &["hello world"]);
        assert!(stopped);
        assert_eq!(out, ["hel"]);
        assert_eq!(text, "hel");
        // A stop at the very start gives no text.
        let (_, stopped, text) = run(&s, &["lo and behold"]);
        assert!(stopped);
        assert_eq!(text, "");
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let s = stops(&["é!"]);
        let (out, stopped, text) = run(&s, &["café", " ", "é", "!"]);
        assert!(stopped);
        assert_eq!(out, ["caf", "é ", "", ""]);
        assert_eq!(text, "café ");
    }

    #[test]
    fn no_stop_strings_release_everything_at_once() {
        let s = StopStrings::default();
        let (out, stopped, text) = run(&s, &["a", "b"]);
        assert!(!stopped);
        assert_eq!(out, ["a", "b", ""]);
        assert_eq!(text, "ab");
    }

    #[test]
    fn limits_are_typed_errors() {
        let many = vec!["x".to_string(); MAX_STOP_STRINGS + 1];
        assert_eq!(
            StopStrings::new(many),
            Err(StopError::TooMany(MAX_STOP_STRINGS + 1))
        );
        assert_eq!(
            StopStrings::new(vec!["a".into(), String::new()]),
            Err(StopError::Empty(1))
        );
        let long = "y".repeat(MAX_STOP_BYTES + 1);
        assert!(matches!(
            StopStrings::new(vec![long]),
            Err(StopError::TooLong { index: 0, .. })
        ));
        assert!(StopStrings::new(vec!["y".repeat(MAX_STOP_BYTES)]).is_ok());
    }
}
