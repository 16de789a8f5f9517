//! Keeps a template from storing a namespace inside a namespace.
//!
//! A namespace is the one mutable value a template has, so it is the one way to build a cycle
//! (`{% set ns.me = ns %}`, or two namespaces holding each other). minijinja (3.1) prints,
//! compares and hashes values recursively without a depth guard, so printing such a value
//! (`{{ ns }}`, `~`, `| string`, `==`) recursed until the stack overflowed: an abort natively, a
//! dead instance in a page (found by fuzzing, target `chat_template`). The VM assigns namespace
//! attributes itself, with no hook, so the guard goes in at compile time: every
//! `{% set a.b = EXPR %}` of the template becomes `{% set a.b = (EXPR) | GUARD %}`, and the
//! [`GUARD`] filter refuses a value that holds a namespace, or an object it cannot look into, or
//! that nests deeper than real templates do. Every cycle needs such an assignment to close it (a
//! new namespace cannot hold itself), so with the guard there are none. Only `set` takes a
//! dotted target (`for` and `with` assign plain names), and `{% set a.b %}...{% endset %}`
//! stores rendered text. Real templates store booleans, numbers, strings, messages and lists of
//! them.

use std::sync::OnceLock;

use minijinja::machinery::{self, ast};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Value, ValueKind};
use minijinja::{ErrorKind, State};

use crate::{ModelError, Result};

/// The filter every namespace assignment's value passes through. Not a name a template would
/// use by chance; a template that calls it itself only runs the same check.
pub(super) const GUARD: &str = "__runahead_namespace_value";

/// Deepest nesting a value stored in a namespace may have (real templates store flat values
/// or lists of messages: three or four levels).
const MAX_DEPTH: usize = 64;

/// Rewrites `source` so each namespace assignment's value passes through [`GUARD`]. The
/// value of `{% set TARGET = VALUE %}` is everything between the first `=` and the block's end
/// (a target is names, dots and commas); the lexer finds those, since minijinja's expression
/// spans do not always cover their expression. The rewrite is then checked on the parsed
/// result: each dotted `set` must assign a [`GUARD`] filter's output, or the template is refused.
pub(super) fn guard_namespace_assignments(source: &str, syntax: &SyntaxConfig) -> Result<String> {
    let parsed = machinery::parse(source, "chat", syntax.clone())
        .map_err(|e| ModelError::ChatTemplate(format!("cannot compile: {e}")))?;
    let mut sets = Vec::new();
    attribute_sets(&parsed, &mut sets);
    if sets.is_empty() {
        return Ok(source.to_owned());
    }
    let values = dotted_set_values(source, syntax)?;
    let close = format!(") | {GUARD}");
    let mut guarded = String::with_capacity(source.len() + values.len() * (close.len() + 1));
    let mut copied = 0;
    for &(start, end) in &values {
        let (Some(before), Some(value)) = (source.get(copied..start), source.get(start..end))
        else {
            return Err(unguardable());
        };
        guarded.push_str(before);
        guarded.push('(');
        guarded.push_str(value);
        guarded.push_str(&close);
        copied = end;
    }
    guarded.push_str(source.get(copied..).ok_or_else(unguardable)?);
    let reparsed = machinery::parse(&guarded, "chat", syntax.clone()).map_err(|_| unguardable())?;
    let mut sets = Vec::new();
    attribute_sets(&reparsed, &mut sets);
    let all_guarded = sets
        .iter()
        .all(|set| matches!(&set.expr, ast::Expr::Filter(f) if f.name == GUARD));
    if sets.len() != values.len() || !all_guarded {
        return Err(unguardable());
    }
    Ok(guarded)
}

/// Byte ranges of the values of `{% set ... = VALUE %}` statements whose target has a dot.
fn dotted_set_values(source: &str, syntax: &SyntaxConfig) -> Result<Vec<(usize, usize)>> {
    use machinery::Token;
    /// Where the lexer is, as far as `set` statements go.
    enum At {
        Text,
        BlockStart,
        Set { dotted: bool, value: Option<usize> },
        OtherStatement,
    }
    let mut values = Vec::new();
    let mut at = At::Text;
    for token in machinery::tokenize(source, false, syntax.clone()) {
        let (token, span) =
            token.map_err(|e| ModelError::ChatTemplate(format!("cannot compile: {e}")))?;
        at = match (token, at) {
            (Token::BlockStart, _) => At::BlockStart,
            (Token::Ident("set"), At::BlockStart) => At::Set {
                dotted: false,
                value: None,
            },
            (Token::Dot, At::Set { value: None, .. }) => At::Set {
                dotted: true,
                value: None,
            },
            (
                Token::Assign,
                At::Set {
                    dotted,
                    value: None,
                },
            ) => At::Set {
                dotted,
                value: Some(span.end_offset as usize),
            },
            (Token::BlockEnd, at) => {
                if let At::Set {
                    dotted: true,
                    value: Some(start),
                } = at
                {
                    values.push((start, span.start_offset as usize));
                }
                At::Text
            }
            (_, At::BlockStart) => At::OtherStatement,
            (_, at) => at,
        };
    }
    Ok(values)
}

fn unguardable() -> ModelError {
    ModelError::ChatTemplate("cannot compile: a namespace assignment could not be guarded".into())
}

/// Every `set` statement of `stmt` whose target has a dotted name, in source order.
fn attribute_sets<'s, 'a>(stmt: &'s ast::Stmt<'a>, out: &mut Vec<&'s ast::Set<'a>>) {
    let each = |body: &'s [ast::Stmt<'a>], out: &mut Vec<&'s ast::Set<'a>>| {
        body.iter().for_each(|child| attribute_sets(child, out))
    };
    match stmt {
        ast::Stmt::Template(t) => each(&t.children, out),
        ast::Stmt::ForLoop(f) => {
            each(&f.body, out);
            each(&f.else_body, out);
        }
        ast::Stmt::IfCond(c) => {
            each(&c.true_body, out);
            each(&c.false_body, out);
        }
        ast::Stmt::WithBlock(w) => each(&w.body, out),
        ast::Stmt::Set(s) => {
            if has_dotted_name(&s.target) {
                out.push(s);
            }
        }
        ast::Stmt::SetBlock(s) => each(&s.body, out),
        ast::Stmt::AutoEscape(a) => each(&a.body, out),
        ast::Stmt::FilterBlock(f) => each(&f.body, out),
        ast::Stmt::Block(b) => each(&b.body, out),
        ast::Stmt::Macro(m) => each(&m.body, out),
        ast::Stmt::CallBlock(c) => each(&c.macro_decl.body, out),
        ast::Stmt::EmitExpr(_)
        | ast::Stmt::EmitRaw(_)
        | ast::Stmt::Import(_)
        | ast::Stmt::FromImport(_)
        | ast::Stmt::Extends(_)
        | ast::Stmt::Include(_)
        | ast::Stmt::Continue(_)
        | ast::Stmt::Break(_)
        | ast::Stmt::Do(_) => {}
    }
}

fn has_dotted_name(target: &ast::Expr) -> bool {
    match target {
        ast::Expr::GetAttr(_) => true,
        ast::Expr::List(list) => list.items.iter().any(has_dotted_name),
        ast::Expr::Tuple(tuple) => tuple.items.iter().any(has_dotted_name),
        _ => false,
    }
}

/// The [`GUARD`] filter: `value` unchanged when it is safe to store in a namespace.
pub(super) fn namespace_value(
    state: &State,
    value: Value,
) -> std::result::Result<Value, minijinja::Error> {
    check_storable(state, &value, 0, namespace_type())?;
    Ok(value)
}

/// The type name minijinja's namespaces report (the type itself is private to minijinja).
fn namespace_type() -> &'static str {
    static NAME: OnceLock<&'static str> = OnceLock::new();
    NAME.get_or_init(|| {
        minijinja::functions::namespace(None)
            .ok()
            .and_then(|ns| ns.as_object().map(|o| o.type_name()))
            .unwrap_or("minijinja::value::namespace_object::Namespace")
    })
}

fn check_storable(
    state: &State,
    value: &Value,
    depth: usize,
    namespace: &str,
) -> std::result::Result<(), minijinja::Error> {
    let refuse = |what: String| Err(minijinja::Error::new(ErrorKind::InvalidOperation, what));
    if depth > MAX_DEPTH {
        return refuse(format!(
            "a value nested deeper than {MAX_DEPTH} levels cannot be stored in a namespace"
        ));
    }
    state.consume_fuel(1)?;
    let Some(object) = value.as_object() else {
        return Ok(()); // none, booleans, numbers, strings, bytes
    };
    if object.type_name() == namespace {
        return refuse("a namespace cannot be stored in a namespace (it could hold itself)".into());
    }
    match value.kind() {
        ValueKind::Seq => {
            for item in value.try_iter()? {
                check_storable(state, &item, depth + 1, namespace)?;
            }
            Ok(())
        }
        ValueKind::Map => {
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                check_storable(state, &key, depth + 1, namespace)?;
                check_storable(state, &item, depth + 1, namespace)?;
            }
            Ok(())
        }
        // Lazy iterables (some of which iterate once), macros, cyclers, loops: printing them can
        // reach what they hold, and looking into them could change them.
        kind => refuse(format!(
            "values of kind {kind} cannot be stored in a namespace (a list can: `| list`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatMessage, ChatTemplate};

    fn syntax() -> SyntaxConfig {
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .unwrap()
    }

    fn render(source: &str) -> Result<String> {
        let template = ChatTemplate::new(source, "<s>", "</s>")?;
        template.render(&[ChatMessage::new("user", "hé")], true)
    }

    #[test]
    fn every_dotted_set_is_guarded_and_renders_as_before() {
        // Each template sets a namespace attribute through a different expression form (and
        // from inside each kind of block), then prints what it stored.
        for (source, expected) in [
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = 1, 2 %}{{ ns.a }}",
                "(1, 2)",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = 'x' if true else 'y' %}{{ ns.a }}",
                "x",
            ),
            (
                "{% set ns = namespace(a='') %}{% set ns.a = ns.a ~ 'b' | upper %}{{ ns.a }}",
                "B",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = (3) %}{{ ns.a }}",
                "3",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = not false %}{{ ns.a }}",
                "True",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = x is defined %}{{ ns.a }}",
                "False",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = {'k': [1, 'é']} %}{{ ns.a.k[1] }}",
                "é",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a, b = [4, 5] %}{{ ns.a }}{{ b }}",
                "45",
            ),
            (
                "{% set ns = namespace(a=0) %}{%- set ns.a = messages[0].content -%} {{ ns.a }}",
                "hé",
            ),
            (
                "é{% set ns = namespace(a=0) %}{% for m in messages %}{% if m.role == 'user' %}\
              {% set ns.a = loop.index0 + 7 %}{% endif %}{% endfor %}{{ ns.a }}",
                "é7",
            ),
            (
                "{% set ns = namespace(a=0) %}{% macro m(n) %}{% set n.a = 9 %}{% endmacro %}\
              {{ m(ns) }}{{ ns.a }}",
                "9",
            ),
            (
                "{% set ns = namespace(a=0) %}{% filter upper %}{% set ns.a = 'f' %}{{ ns.a }}\
              {% endfilter %}",
                "F",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a %}block{% endset %}{{ ns.a }}",
                "block",
            ),
            (
                "{% raw %}{% set ns.a = ns %}{% endraw %}",
                "{% set ns.a = ns %}",
            ),
            (
                "{% set ns = namespace(a=0) %}{% set ns.a = [1, 2] | reverse | list %}{{ ns.a }}",
                "[2, 1]",
            ),
        ] {
            assert_eq!(render(source).unwrap(), expected, "{source}");
            let guarded = guard_namespace_assignments(source, &syntax()).unwrap();
            let dotted_sets = match source.starts_with("{% raw") {
                true => 0,
                false => source.matches(".a =").count() + source.matches(".a, b =").count(),
            };
            assert_eq!(guarded.matches(GUARD).count(), dotted_sets, "{guarded}");
        }
    }

    #[test]
    fn a_namespace_cannot_come_to_hold_itself() {
        // Each of these printed (or compared) a cycle and overflowed the stack before the guard
        // (the first one is the fuzzer's).
        for source in [
            "{% set ns = namespace(a=1) %}{% set ns.a = ns, 1 %}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns ~ '' }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = {'k': ns} %}{{ ns | string }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = {'k': [[ns]]} %}{{ ns == ns }}",
            "{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ a }}",
            "{% set ns = namespace(a=1) %}{% set ns.a, x = [ns, 1] %}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = cycler([ns, 1]) %}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = joiner(ns) %}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% set ns.a = [ns] | reverse %}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% macro m(n) %}{% set n.a = n %}{% endmacro %}\
             {{ m(ns) }}{{ ns }}",
            "{% set ns = namespace(a=1) %}{% for i in range(100) %}{% set ns.a = [ns.a] %}\
             {% endfor %}{{ ns }}",
        ] {
            let error = render(source).unwrap_err().to_string();
            assert!(error.contains("namespace"), "{source}: {error}");
        }
    }

    #[test]
    fn a_template_that_calls_the_guard_itself_gets_the_same_check() {
        assert!(render("{{ 1 | __runahead_namespace_value }}").is_ok());
        let error = render("{% set ns = namespace() %}{{ ns | __runahead_namespace_value }}");
        assert!(error.unwrap_err().to_string().contains("namespace"));
    }
}
