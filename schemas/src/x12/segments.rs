//! X12 segments: the delimiters an interchange declares in its ISA, a reader that yields
//! one segment at a time over the text without building a tree, and a writer.
//!
//! Written here rather than taken from `x12-types`: that crate parses a whole
//! interchange into one object tree (memory in proportion to the file, the claims'
//! copies on top) and fixes the loop structure per guide, where intake wants one pass
//! that keeps only the claims, per-segment positions for the 999, and any delimiters the
//! sender chose. The grammar a reader needs is small: the ISA is fixed-width and names
//! every delimiter.

use std::fmt::Write as _;

/// The delimiters of one interchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delimiters {
    pub element: char,
    pub component: char,
    pub repetition: char,
    pub segment: char,
}

impl Delimiters {
    /// What the service writes: the ones most receivers expect.
    pub const OUT: Delimiters = Delimiters {
        element: '*',
        component: ':',
        repetition: '^',
        segment: '~',
    };
}

/// Why text is not an X12 interchange at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The segment's position in the interchange, from 1; 0 before the first.
    pub position: usize,
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.position == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "segment {}: {}", self.position, self.message)
        }
    }
}

pub(crate) fn syntax(position: usize, message: impl Into<String>) -> SyntaxError {
    SyntaxError {
        position,
        message: message.into(),
    }
}

/// The ISA is 106 characters with its terminator; its 3rd character is the element
/// separator, its 105th the component separator and its 106th the segment terminator.
pub fn delimiters(text: &str) -> Result<Delimiters, SyntaxError> {
    let t = text.trim_start();
    if !t.starts_with("ISA") {
        return Err(syntax(0, "an interchange starts with an ISA segment"));
    }
    let chars: Vec<char> = t.chars().take(106).collect();
    if chars.len() < 106 {
        return Err(syntax(
            1,
            "the ISA segment is shorter than its 106 characters",
        ));
    }
    let element = chars[3];
    let separators = chars[..105].iter().filter(|c| **c == element).count();
    if separators != 16 {
        return Err(syntax(
            1,
            "the ISA segment has fixed-width elements: 16 separators in 105 characters",
        ));
    }
    let d = Delimiters {
        element,
        repetition: chars[82],
        component: chars[104],
        segment: chars[105],
    };
    let all = [d.element, d.component, d.segment];
    if all.iter().any(|c| c.is_ascii_alphanumeric())
        || d.element == d.component
        || d.element == d.segment
        || d.component == d.segment
    {
        return Err(syntax(1, "the ISA declares delimiters that clash"));
    }
    Ok(d)
}

/// One segment, borrowed from the interchange's text.
#[derive(Debug, Clone)]
pub struct Segment<'a> {
    pub id: &'a str,
    /// Its position in the interchange, from 1 (the ISA).
    pub position: usize,
    elements: Vec<&'a str>,
    component: char,
}

impl<'a> Segment<'a> {
    /// Element `n`, from 1; empty when absent.
    pub fn el(&self, n: usize) -> &'a str {
        self.elements.get(n - 1).copied().unwrap_or("")
    }

    /// Component `m` (from 1) of element `n`; empty when absent.
    pub fn comp(&self, n: usize, m: usize) -> &'a str {
        self.el(n).split(self.component).nth(m - 1).unwrap_or("")
    }

    /// The components of element `n`.
    pub fn comps(&self, n: usize) -> impl Iterator<Item = &'a str> + 'a {
        self.el(n).split(self.component)
    }

    pub fn len(&self) -> usize {
        self.elements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }
}

/// The segments of an interchange, one at a time.
#[derive(Debug)]
pub struct Segments<'a> {
    rest: &'a str,
    d: Delimiters,
    position: usize,
}

impl<'a> Segments<'a> {
    pub fn new(text: &'a str) -> Result<Self, SyntaxError> {
        let d = delimiters(text)?;
        Ok(Self {
            rest: text.trim_start(),
            d,
            position: 0,
        })
    }

    pub fn delimiters(&self) -> Delimiters {
        self.d
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<Segment<'a>, SyntaxError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest.trim_start_matches(['\r', '\n', ' ', '\t']);
        if rest.is_empty() {
            return None;
        }
        let (raw, after) = match rest.find(self.d.segment) {
            Some(i) => (&rest[..i], &rest[i + self.d.segment.len_utf8()..]),
            None => (rest, ""),
        };
        self.rest = after;
        self.position += 1;
        if after.is_empty() && !rest.contains(self.d.segment) {
            self.rest = "";
            return Some(Err(syntax(
                self.position,
                "the last segment has no terminator; the interchange is cut short",
            )));
        }
        let mut parts = raw.split(self.d.element);
        let id = parts.next().unwrap_or("");
        if !(2..=3).contains(&id.len())
            || !id
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        {
            self.rest = "";
            return Some(Err(syntax(
                self.position,
                format!("`{}` is not a segment identifier", truncate(id, 8)),
            )));
        }
        Some(Ok(Segment {
            id,
            position: self.position,
            elements: parts.collect(),
            component: self.d.component,
        }))
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Builds an X12 document segment by segment with [`Delimiters::OUT`], one segment to a
/// line, counting the segments of the open transaction set for its SE.
#[derive(Debug, Default)]
pub struct Writer {
    out: String,
    in_set: usize,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    /// One segment; trailing empty elements are left out, as the standard requires.
    pub fn seg(&mut self, id: &str, elements: &[&str]) {
        let d = Delimiters::OUT;
        let used = elements
            .iter()
            .rposition(|e| !e.is_empty())
            .map_or(0, |i| i + 1);
        self.out.push_str(id);
        for e in &elements[..used] {
            self.out.push(d.element);
            self.out.push_str(e);
        }
        self.out.push(d.segment);
        self.out.push('\n');
        self.in_set += 1;
    }

    /// Starts counting a transaction set at its ST.
    pub fn start_set(&mut self) {
        self.in_set = 0;
    }

    /// The segments written since [`Writer::start_set`], the SE included when called
    /// just before writing it.
    pub fn set_count(&self) -> usize {
        self.in_set + 1
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Text as an X12 element value: delimiters and control characters become spaces,
/// and it is cut to `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    let d = Delimiters::OUT;
    text.chars()
        .map(|c| {
            if c == d.element
                || c == d.component
                || c == d.segment
                || c == d.repetition
                || c.is_control()
                || !c.is_ascii()
            {
                ' '
            } else {
                c
            }
        })
        .take(max)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Cents as X12 money: dollars, with the cents only when there are any
/// (`12345` → `123.45`, `1200` → `12`, `-5` → `-0.05`).
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let c = cents.unsigned_abs();
    let (d, r) = (c / 100, c % 100);
    let mut s = String::new();
    if r == 0 {
        let _ = write!(s, "{sign}{d}");
    } else if r % 10 == 0 {
        let _ = write!(s, "{sign}{d}.{}", r / 10);
    } else {
        let _ = write!(s, "{sign}{d}.{r:02}");
    }
    s
}

/// X12 money as cents: digits with at most two decimals, not negative.
pub fn cents(text: &str) -> Option<i64> {
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    if whole.len() > 13
        || frac.len() > 2
        || (whole.is_empty() && frac.is_empty())
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let w: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let f: i64 = match frac.len() {
        0 => 0,
        1 => frac.parse::<i64>().ok()? * 10,
        _ => frac.parse().ok()?,
    };
    w.checked_mul(100)?.checked_add(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISA: &str = "ISA*00*          *00*          *ZZ*SENDER         *ZZ*RECEIVER       *240101*1200*^*00501*000000001*0*P*:~";

    #[test]
    fn the_isa_names_the_delimiters() {
        let d = delimiters(ISA).unwrap();
        assert_eq!(d, Delimiters::OUT);
        let other = ISA.replace('*', "|").replace('~', "\n");
        let d = delimiters(&other).unwrap();
        assert_eq!((d.element, d.segment), ('|', '\n'));
        assert!(delimiters("GS*HC~").is_err());
        assert!(delimiters(&ISA[..60]).is_err());
    }

    #[test]
    fn segments_come_one_at_a_time_with_positions() {
        let text = format!("{ISA}\nGS*HC*A*B~\r\nSV1*HC:99213:25*150*UN*1~");
        let segs: Vec<_> = Segments::new(&text).unwrap().map(|s| s.unwrap()).collect();
        assert_eq!(segs.len(), 3);
        assert_eq!((segs[1].id, segs[1].position), ("GS", 2));
        assert_eq!(segs[2].comp(1, 2), "99213");
        assert_eq!(segs[2].comp(1, 3), "25");
        assert_eq!(segs[2].el(4), "1");
        assert_eq!(segs[2].el(9), "");
        let cut = format!("{ISA}GS*HC*A");
        let last = Segments::new(&cut).unwrap().last().unwrap();
        assert!(last.is_err());
    }

    #[test]
    fn money_round_trips() {
        for (c, s) in [
            (12345, "123.45"),
            (1200, "12"),
            (1250, "12.5"),
            (5, "0.05"),
            (0, "0"),
        ] {
            assert_eq!(money(c), s);
            assert_eq!(cents(s), Some(c));
        }
        assert_eq!(money(-5), "-0.05");
        for bad in ["", ".", "1.234", "-1", "1e3", "1,00"] {
            assert_eq!(cents(bad), None, "{bad}");
        }
        assert_eq!(cents(".5"), Some(50));
    }
}
