//! Bounded replacements of the minijinja builtins that 3.1 leaves unbounded, and the output
//! cap: a template comes from the model file, so `join`, `format`, `tojson` and `namespace`
//! charge the render's fuel for what they build (the namespace leak was found by fuzzing,
//! target `chat_template`; `join` and `tojson` by probing 3.1 with the one-step operations fuel
//! does not stop).

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Write};

use minijinja::value::{Kwargs, Rest, Value, ValueIter, ValueKind, ValueOrKwargs};
use minijinja::{context, Environment, ErrorKind, State};

/// Bytes one unit of fuel pays for (minijinja's `UNITS_PER_FUEL`, one unit per byte).
const BYTES_PER_FUEL: u64 = 64;

/// Widest indent `tojson` accepts. Real templates use 2 or 4; the indent is repeated on every
/// line once per nesting level, so an unbounded one turns a small value into gigabytes.
const MAX_JSON_INDENT: usize = 16;
/// Deepest nesting `tojson` writes (real templates pass tool definitions a few levels deep).
const MAX_JSON_DEPTH: usize = 256;

/// Most namespaces one render may create (real templates create one or two); each is kept
/// until the render ends (see [`break_namespace_cycles`]).
const MAX_NAMESPACES: usize = 1000;

thread_local! {
    /// The namespaces the render running on this thread has created.
    static NAMESPACES: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
}

/// Bytes the fuel left to this render pays for.
fn fuel_bytes(state: &State) -> usize {
    state.fuel_levels().map_or(usize::MAX, |(_, remaining)| {
        usize::try_from(remaining.saturating_mul(BYTES_PER_FUEL)).unwrap_or(usize::MAX)
    })
}

fn out_of_fuel() -> minijinja::Error {
    minijinja::Error::from(ErrorKind::OutOfFuel)
}

/// A string that refuses to grow past `limit` bytes.
struct Capped {
    text: String,
    limit: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.len() > self.limit.saturating_sub(self.text.len()) {
            return Err(fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// The `join` filter (`value|join(d='', attribute=None)`), bounded. minijinja 3.1's checks its
/// output against the fuel only when the joiner is not empty, so
/// `(['x' * 99999999] * 100) | join` built a 10 GB string. This one charges every item and
/// stops before the output passes what the remaining fuel pays for.
pub(super) fn join(
    state: &State,
    value: &Value,
    joiner: Option<String>,
    attribute: Option<String>,
    kwargs: Kwargs,
) -> std::result::Result<String, minijinja::Error> {
    let joiner = match joiner {
        Some(j) => j,
        None => kwargs.get::<Option<String>>("d")?.unwrap_or_default(),
    };
    let attribute = match attribute {
        Some(a) => Some(a),
        None => kwargs.get::<Option<String>>("attribute")?,
    };
    kwargs.assert_all_used()?;
    let items = value.try_iter().map_err(|e| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("cannot join value of type {}", value.kind()),
        )
        .with_source(e)
    })?;
    let mut out = Capped {
        text: String::new(),
        limit: fuel_bytes(state),
    };
    for (i, item) in items.enumerate() {
        state.consume_fuel(1)?;
        let item = match &attribute {
            Some(path) => attribute_path(item, path),
            None => item,
        };
        let written = if i > 0 {
            fmt::Write::write_str(&mut out, &joiner)
        } else {
            Ok(())
        };
        written
            .and_then(|()| match item.as_str() {
                Some(s) => fmt::Write::write_str(&mut out, s),
                None => fmt::Write::write_fmt(&mut out, format_args!("{item}")),
            })
            .map_err(|_| out_of_fuel())?;
    }
    state.consume_fuel(out.text.len() as u64 / BYTES_PER_FUEL)?;
    Ok(out.text)
}

/// `item.a.0.b`, as minijinja's attribute arguments read it: undefined where a step is missing.
fn attribute_path(item: Value, path: &str) -> Value {
    path.split('.')
        .try_fold(item, |v, step| match step.parse::<usize>() {
            Ok(i) => v.get_item_by_index(i).ok(),
            Err(_) => v.get_attr(step).ok(),
        })
        .unwrap_or(Value::UNDEFINED)
}

/// The `tojson` filter, bounded: its indent by [`MAX_JSON_INDENT`]
/// (`tojson(indent=1000000000)` ran 9 s over gigabytes of spaces), and its output by what the
/// remaining fuel pays for, checked before it is built: minijinja 3.1 builds the whole JSON
/// and charges for it afterwards, and pretty JSON repeats depth x indent spaces on every line
/// (20,000 nested lists with indent 2 are 800 MB). The JSON is charged as minijinja charges its
/// own serializations (16 units a byte).
pub(super) fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    kwargs: Kwargs,
) -> std::result::Result<Value, minijinja::Error> {
    let width = match &indent {
        Some(v) => Some(v.clone()),
        None => kwargs.peek::<Option<Value>>("indent")?,
    };
    let width = match width {
        None => 0,
        Some(w) if w.kind() == ValueKind::Bool => usize::from(w.is_true()) * 2,
        Some(w) => w.as_usize().unwrap_or(0),
    };
    if width > MAX_JSON_INDENT {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson indent {width} is more than {MAX_JSON_INDENT}"),
        ));
    }
    match json_fits(value, width, fuel_bytes(state)) {
        JsonFits::Yes => {}
        JsonFits::TooLarge => return Err(out_of_fuel()),
        JsonFits::TooDeep => {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson of a value nested deeper than {MAX_JSON_DEPTH} levels (or cyclic)"),
            ))
        }
    }
    let json = minijinja::filters::tojson(value, indent, kwargs)?;
    let len = json.as_str().map_or(0, str::len) as u64;
    state.consume_fuel(len.saturating_mul(16) / BYTES_PER_FUEL)?;
    Ok(json)
}

/// What [`json_fits`] found.
#[derive(Debug, PartialEq)]
enum JsonFits {
    Yes,
    TooLarge,
    TooDeep,
}

/// Whether `value` as JSON (pretty with `indent` spaces a level when not 0) takes at most
/// `limit` bytes, by an upper bound summed without building it (every string byte counted as
/// a six-byte escape), and nests at most [`MAX_JSON_DEPTH`] containers deep. The walk keeps one
/// iterator per open container and stops as soon as the bound passes `limit` or the depth
/// passes its cap, so it visits at most `limit / 3` items and holds at most `MAX_JSON_DEPTH`
/// iterators: without the cap a cyclic value (a namespace holding itself) walked as deep as
/// the fuel's bytes allowed, holding a gigabyte of iterators (found by fuzzing).
fn json_fits(value: &Value, indent: usize, limit: usize) -> JsonFits {
    enum Open {
        Seq(ValueIter),
        Map(Value, ValueIter),
    }
    let mut total = 0usize;
    let mut add = |n: usize| {
        total = total.saturating_add(n);
        total <= limit
    };
    // A separator and a newline, and the indent of an item at `depth`.
    let item = |depth: usize| 3usize.saturating_add(indent.saturating_mul(depth));
    let string = |len: usize| len.saturating_mul(6).saturating_add(2);
    let mut stack: Vec<(Open, usize)> = Vec::new();
    let mut next = Some((value.clone(), 0usize));
    loop {
        if let Some((v, depth)) = next.take() {
            let fits = match v.kind() {
                ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => {
                    if depth >= MAX_JSON_DEPTH {
                        return JsonFits::TooDeep;
                    }
                    let Ok(iter) = v.try_iter() else {
                        return JsonFits::TooLarge;
                    };
                    let open = if v.kind() == ValueKind::Map {
                        Open::Map(v, iter)
                    } else {
                        Open::Seq(iter)
                    };
                    stack.push((open, depth + 1));
                    add(2 + item(depth))
                }
                ValueKind::String => add(string(v.as_str().map_or(0, str::len))),
                ValueKind::Bytes => add(v
                    .as_bytes()
                    .map_or(0, <[u8]>::len)
                    .saturating_mul(item(depth + 1).saturating_add(3))),
                ValueKind::Plain => add(string(v.to_string().len())),
                _ => add(40),
            };
            if !fits {
                return JsonFits::TooLarge;
            }
        }
        let Some((open, depth)) = stack.last_mut() else {
            return JsonFits::Yes;
        };
        let depth = *depth;
        let child = match open {
            Open::Seq(items) => items.next().map(|v| (v, 0)),
            Open::Map(map, keys) => keys.next().map(|key| {
                let key_len = string(key.to_string().len()) + 2;
                (map.get_item(&key).unwrap_or_default(), key_len)
            }),
        };
        match child {
            Some((v, extra)) => {
                if !add(item(depth).saturating_add(extra)) {
                    return JsonFits::TooLarge;
                }
                next = Some((v, depth));
            }
            None => {
                stack.pop();
            }
        }
    }
}

/// The `format` filter (printf style), refusing what would make minijinja 3.1 panic (see
/// [`check_format_fields`]).
pub(super) fn format(
    state: &mut State,
    value: &Value,
    args: Rest<ValueOrKwargs>,
) -> std::result::Result<Value, minijinja::Error> {
    check_format_fields(value, "%(", ')')?;
    minijinja::filters::format(state, value, args)
}

/// Refuses a format string with anything but ASCII in a field (`%(key)s` for the `format`
/// filter, `{...}` for the `.format()` method). minijinja 3.1's format parser steps through
/// keys a byte at a time and slices the string there, which panics inside a multi-byte
/// character (found by fuzzing: `'%(é)s' | format`); real templates name fields in ASCII.
pub(super) fn check_format_fields(
    value: &Value,
    open: &str,
    close: char,
) -> std::result::Result<(), minijinja::Error> {
    let mut rest = value.as_str().unwrap_or_default();
    while let Some(start) = rest.find(open) {
        let field = &rest[start + open.len()..];
        let end = field.find(close).unwrap_or(field.len());
        if !field[..end].is_ascii() {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                "format fields must be ASCII",
            ));
        }
        rest = &field[end..];
    }
    Ok(())
}

/// The `namespace` function, remembering each namespace it makes for
/// [`break_namespace_cycles`].
pub(super) fn namespace(
    defaults: Option<ValueOrKwargs>,
) -> std::result::Result<Value, minijinja::Error> {
    if NAMESPACES.with_borrow(Vec::len) >= MAX_NAMESPACES {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("more than {MAX_NAMESPACES} namespaces"),
        ));
    }
    let ns = minijinja::functions::namespace(defaults)?;
    NAMESPACES.with_borrow_mut(|all| all.push(ns.clone()));
    Ok(ns)
}

/// Empties every namespace the render on this thread created. `{% set ns.me = ns %}` makes a
/// reference cycle that minijinja (3.1) never frees (it breaks the cycles of macro closures, not
/// of namespaces), so each render would leak what the namespace holds: up to the fuel's
/// 128 MB. The namespace guard refuses such an assignment; this stays as a second line, at
/// the cost of a tiny render per namespace attribute. Every cycle passes through an attribute set by `{% set ns.name = ... %}` after the
/// namespace was made, and `name` is an identifier, so setting each identifier-named attribute
/// to none breaks them all; namespaces can only be assigned to from a template, hence the tiny
/// templates.
pub(super) fn break_namespace_cycles(env: &Environment) {
    let namespaces = NAMESPACES.with_borrow_mut(std::mem::take);
    for ns in namespaces {
        let keys: Vec<Value> = ns.try_iter().map(Iterator::collect).unwrap_or_default();
        for key in keys
            .iter()
            .filter_map(Value::as_str)
            .filter(|k| is_identifier(k))
        {
            let _ = env.render_str(
                &format!("{{% set ns.{key} = none %}}"),
                context! { ns => &ns },
            );
        }
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Collects rendered text and fails the render once it would pass `limit` bytes, so a
/// runaway template stops at the limit instead of when memory runs out.
pub(super) struct CappedWriter {
    pub(super) bytes: Vec<u8>,
    pub(super) limit: usize,
    pub(super) overflowed: bool,
}

impl CappedWriter {
    pub(super) fn new(limit: usize) -> Self {
        CappedWriter {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.limit.saturating_sub(self.bytes.len()) {
            self.overflowed = true;
            return Err(io::Error::other("chat template output limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
