//! Chat templates: the Jinja template in `tokenizer.chat_template`, rendered with minijinja
//! (with Python-compatible string/dict methods, which HF templates use).
//!
//! The template comes from the model file, so rendering is bounded: minijinja's fuel pays for
//! every step and every byte a render creates (so runaway loops and runaway data both stop), a
//! cap on the output stops runaway text, and the few builtins that minijinja does not bound
//! themselves are replaced by bounded versions (see [`ChatTemplate::new`]).

use std::collections::BTreeMap;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{context, Environment, ErrorKind};
use serde::Serialize;

use crate::{ModelError, Result};
use tools::{template_tools, with_json_tools_prompt, Tool, ToolSyntax};

mod builtins;
mod model_template;
mod namespace_guard;
pub mod tools;

pub use model_template::{model_template, ModelTemplate};

use builtins::{
    break_namespace_cycles, check_format_fields, format, join, namespace, tojson, CappedWriter,
};

/// Fuel one render may use: minijinja (3.x) charges one per instruction and one per 64 bytes of
/// data it creates or visits, so this also bounds a render's allocations to about 128 MB.
/// Measured (`tests/limits.rs`): one message takes 43 with SmolLM2's ChatML template and 48
/// with Qwen2.5's, and a 101-message conversation 2,700 and 3,572; 2,000,000 is 560x the
/// latter, yet runaway loops stop within a fraction of a second.
pub const TEMPLATE_FUEL: u64 = 2_000_000;

/// Bytes a render may produce beyond the conversation's own text (roles and contents count
/// on top, so a long prompt is never refused here: the context limit decides). Real templates
/// add tens of bytes per message and a system prompt.
pub const TEMPLATE_OUTPUT_SLACK: usize = 1 << 20;

/// One message of a conversation.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// The message's other fields the template sees as given, as HF templates read them
    /// (OpenAI's `name`, an assistant's `tool_calls`, a tool result's `tool_call_id`).
    #[serde(flatten)]
    pub fields: BTreeMap<String, serde_json::Value>,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        ChatMessage {
            role: role.to_owned(),
            content: content.to_owned(),
            fields: BTreeMap::new(),
        }
    }

    /// Bytes of the message's own text: role, content and the other fields as JSON.
    fn text_len(&self) -> usize {
        let fields: usize = self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.to_string().len())
            .sum();
        self.role.len() + self.content.len() + fields
    }
}

/// Roles a conversation passed to [`ChatTemplate::render_conversation`] may use (`tool`: the
/// result of a tool call, which the template renders as it renders tool results).
pub const CHAT_ROLES: &[&str] = &["system", "user", "assistant", "tool"];

/// Most messages one conversation may have (far beyond a context window's worth of turns; it
/// bounds the work before the context limit is known).
pub const MAX_MESSAGES: usize = 10_000;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    tool_syntax: ToolSyntax,
}

impl ChatTemplate {
    /// Compiles `source` with the tokenizer's BOS and EOS texts as `bos_token`/`eos_token`.
    pub fn for_tokenizer(source: &str, tokenizer: &crate::Tokenizer) -> Result<Self> {
        let special = |id: Option<u32>| id.map(|i| tokenizer.token_text(i)).unwrap_or_default();
        ChatTemplate::new(source, &special(tokenizer.bos), &special(tokenizer.eos))
    }

    /// Compiles `source`; `bos`/`eos` are the texts templates see as `bos_token`/`eos_token`.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(|state, value, method, args| {
            if method == "format" {
                check_format_fields(value, "{", '}')?;
            }
            minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
        });
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
        // Bounded replacements of builtins minijinja 3.1 leaves unbounded (the namespace leak
        // found by fuzzing, fuzz/ target chat_template; join and tojson by probing 3.1 with
        // the one-step operations fuel does not stop).
        env.add_filter("join", join);
        env.add_filter("format", format);
        env.add_filter("tojson", tojson);
        env.add_function("namespace", namespace);
        env.add_filter(namespace_guard::GUARD, namespace_guard::namespace_value);
        env.set_fuel(Some(TEMPLATE_FUEL));
        // HF templates are whitespace-exact with these two settings.
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| ModelError::ChatTemplate(format!("syntax: {e}")))?;
        let tool_syntax = ToolSyntax::of_template(source);
        let source = namespace_guard::guard_namespace_assignments(source, &syntax)?;
        env.set_syntax(syntax);
        env.add_template_owned("chat", source)
            .map_err(|e| ModelError::ChatTemplate(format!("cannot compile: {e}")))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
            tool_syntax,
        })
    }

    /// How this template's model is given tools and spells its calls.
    pub fn tool_syntax(&self) -> ToolSyntax {
        self.tool_syntax
    }

    /// Renders a conversation; `add_generation_prompt` opens the assistant's turn.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with_cost(messages, add_generation_prompt)
            .map(|(text, _)| text)
    }

    /// [`ChatTemplate::render_conversation`] with `tools` offered to the model: the template
    /// renders them ([`ToolSyntax::Hermes`]), or they are described in the system message
    /// ([`ToolSyntax::Json`]). No tools: the plain render.
    pub fn render_conversation_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: &[Tool],
    ) -> Result<String> {
        check_conversation(messages)?;
        if tools.is_empty() {
            return self.render(messages, true);
        }
        match self.tool_syntax {
            ToolSyntax::Hermes => {
                let tools = template_tools(tools);
                on_render_stack(|| self.render_here(messages, Some(&tools), true))
                    .map(|(text, _)| text)
            }
            ToolSyntax::Json => self.render(&with_json_tools_prompt(messages, tools), true),
        }
    }

    /// Renders a conversation a user sent (the chat API): at least one message, each with a
    /// role of [`CHAT_ROLES`], with the assistant's turn opened after the last.
    pub fn render_conversation(&self, messages: &[ChatMessage]) -> Result<String> {
        check_conversation(messages)?;
        self.render(messages, true)
    }

    /// [`ChatTemplate::render`] that also returns the steps (fuel) the render took, to check
    /// real templates against [`TEMPLATE_FUEL`].
    pub fn render_with_cost(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<(String, u64)> {
        on_render_stack(|| self.render_here(messages, None, add_generation_prompt))
    }

    fn render_here(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<(String, u64)> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| ModelError::ChatTemplate(e.to_string()))?;
        let tools_len = tools.map_or(0, |t| t.to_string().len());
        let own_text: usize = messages
            .iter()
            .map(ChatMessage::text_len)
            .sum::<usize>()
            .saturating_add(tools_len);
        let mut out = CappedWriter::new(own_text.saturating_add(TEMPLATE_OUTPUT_SLACK));
        let rendered = template
            .render_captured_to(
                context! {
                    messages => Serde(messages),
                    tools => tools.map(Serde),
                    add_generation_prompt => add_generation_prompt,
                    bos_token => self.bos.as_str(),
                    eos_token => self.eos.as_str(),
                },
                &mut out,
            )
            .map(|captured| captured.state().fuel_levels().map_or(0, |(used, _)| used));
        break_namespace_cycles(&self.env);
        match rendered {
            Ok(used) => {
                let text = String::from_utf8(out.bytes)
                    .map_err(|_| ModelError::ChatTemplate("rendered invalid UTF-8".into()))?;
                Ok((text, used))
            }
            Err(_) if out.overflowed => Err(ModelError::ChatTemplateOutput { limit: out.limit }),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(ModelError::ChatTemplateFuel {
                limit: TEMPLATE_FUEL,
            }),
            Err(e) => Err(ModelError::ChatTemplate(format!("cannot render: {e}"))),
        }
    }
}

/// Stack of the thread a render runs on (natively). minijinja prints, serializes, compares and
/// drops nested values recursively, and a template nests a value as deep as its fuel pays for:
/// `{% set ns.x = [ns.x] %}` in loops reaches 231,000 levels, which took more than 64 MB of
/// stack to print (measured in release; dropping it, less than 32 MB) and aborted the process
/// on a main thread's 8 MB. Only the pages a render touches are committed.
#[cfg(not(target_arch = "wasm32"))]
const RENDER_STACK: usize = 256 << 20;

/// What [`ChatTemplate::render_conversation`] refuses, without rendering anything.
pub fn check_conversation(messages: &[ChatMessage]) -> Result<()> {
    if messages.is_empty() {
        return Err(ModelError::InvalidMessages(
            "the conversation is empty: give at least one message".into(),
        ));
    }
    if messages.len() > MAX_MESSAGES {
        return Err(ModelError::InvalidMessages(format!(
            "{} messages, more than the {MAX_MESSAGES} a conversation may have",
            messages.len()
        )));
    }
    for (i, m) in messages.iter().enumerate() {
        if !CHAT_ROLES.contains(&m.role.as_str()) {
            let mut role: String = m.role.chars().take(40).collect();
            if role.len() < m.role.len() {
                role.push_str("...");
            }
            return Err(ModelError::InvalidMessages(format!(
                "message {i} has role {role:?}: expected one of {}",
                CHAT_ROLES.join(", ")
            )));
        }
    }
    Ok(())
}

/// Runs `render` on a thread with [`RENDER_STACK`] of stack. On wasm32 there are no threads:
/// the render runs on the caller's stack (docs/fuzzing.md, "Open").
fn on_render_stack<T: Send>(render: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::thread::scope(|scope| {
            let thread = std::thread::Builder::new()
                .name("chat-template".into())
                .stack_size(RENDER_STACK)
                .spawn_scoped(scope, render)
                .map_err(|e| ModelError::ChatTemplate(format!("cannot start a render: {e}")))?;
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
    #[cfg(target_arch = "wasm32")]
    render()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn renders_chatml() {
        let t = ChatTemplate::new(CHATML, "<|im_start|>", "<|im_end|>").unwrap();
        let out = t.render(&[ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn conversations_are_checked_before_rendering() {
        let t = ChatTemplate::new(CHATML, "<|im_start|>", "<|im_end|>").unwrap();
        let conversation = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi"),
            ChatMessage::new("assistant", "Hello."),
            ChatMessage::new("user", "Bye"),
        ];
        assert_eq!(
            t.render_conversation(&conversation).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
        );
        let empty = t.render_conversation(&[]).unwrap_err();
        assert!(matches!(empty, ModelError::InvalidMessages(_)), "{empty}");
        let robot = t
            .render_conversation(&[ChatMessage::new("robot", "{}")])
            .unwrap_err();
        assert!(matches!(robot, ModelError::InvalidMessages(_)), "{robot}");
        assert!(robot.to_string().contains("\"robot\""), "{robot}");
        let long_role = "r".repeat(10_000);
        let e = check_conversation(&[ChatMessage::new(&long_role, "")]).unwrap_err();
        assert!(e.to_string().len() < 200, "{e}");
    }

    #[test]
    fn templates_see_tool_calls_tool_results_and_names() {
        let source = "{% for m in messages %}{{ m.role }}:{{ m.content }}\
            {% if m.name is defined %}({{ m.name }}){% endif %}\
            {% for c in m.tool_calls or [] %}[{{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}\
            {% if m.tool_call_id is defined %}<{{ m.tool_call_id }}>{% endif %};{% endfor %}";
        let t = ChatTemplate::new(source, "", "").unwrap();
        let mut user = ChatMessage::new("user", "Weather?");
        user.fields.insert("name".into(), "ann".into());
        let mut call = ChatMessage::new("assistant", "");
        let calls = r#"[{"id": "c1", "type": "function",
            "function": {"name": "weather", "arguments": {"city": "Paris"}}}]"#;
        call.fields
            .insert("tool_calls".into(), serde_json::from_str(calls).unwrap());
        let mut result = ChatMessage::new("tool", "sunny");
        result.fields.insert("tool_call_id".into(), "c1".into());
        assert_eq!(
            t.render_conversation(&[user, call, result]).unwrap(),
            // tojson writes Python's json.dumps separators, as HF's templates see them.
            r#"user:Weather?(ann);assistant:[weather {"city": "Paris"}];tool:sunny<c1>;"#
        );
    }

    #[test]
    fn python_methods_and_raise_exception() {
        let t = ChatTemplate::new("{{ messages[0].content.strip().upper() }}", "", "").unwrap();
        assert_eq!(
            t.render(&[ChatMessage::new("user", "  a b ")], false)
                .unwrap(),
            "A B"
        );
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").unwrap();
        let err = t.render(&[], false).unwrap_err().to_string();
        assert!(err.contains("no system role"), "{err}");
        assert!(ChatTemplate::new("{% if %}", "", "").is_err());
    }

    #[test]
    fn runaway_loops_run_out_of_fuel_quickly() {
        let source =
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
        let t = ChatTemplate::new(source, "", "").unwrap();
        let start = std::time::Instant::now();
        let err = t.render(&[], false).unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::ChatTemplateFuel {
                    limit: TEMPLATE_FUEL
                }
            ),
            "{err}"
        );
        assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
        // An endless recursion through a macro is stopped by minijinja's recursion limit
        // (before the fuel runs out), never by the stack.
        let t =
            ChatTemplate::new("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "", "").unwrap();
        let err = t.render(&[], false).unwrap_err();
        assert!(matches!(err, ModelError::ChatTemplate(_)), "{err}");
    }

    #[test]
    fn runaway_output_hits_the_size_limit() {
        let message = [ChatMessage::new("user", "hello")];
        let limit = "user".len() + "hello".len() + TEMPLATE_OUTPUT_SLACK;
        for source in [
            // One huge value (minijinja caps one repetition at 100 MB).
            "{{ 'x' * 100000000 }}",
            // Many small writes.
            "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
            // Repeating the user's text.
            "{% for i in range(100000) %}{{ messages[0].content * 100 }}{% endfor %}",
        ] {
            let t = ChatTemplate::new(source, "", "").unwrap();
            let err = t.render(&message, false).unwrap_err();
            assert!(
                matches!(err, ModelError::ChatTemplateOutput { limit: l } if l == limit),
                "{source}: {err}"
            );
        }
        // A long conversation is not refused: its own text does not count against the slack.
        let long = "y".repeat(3 * TEMPLATE_OUTPUT_SLACK);
        let t = ChatTemplate::new(CHATML, "", "").unwrap();
        let out = t.render(&[ChatMessage::new("user", &long)], true).unwrap();
        assert!(out.len() > long.len());
    }

    /// Found by fuzzing: minijinja 2.24 indexed out of bounds (a panic, which aborts the page)
    /// slicing an empty string backwards. Backward slices follow Python's.
    #[test]
    fn slicing_backwards_never_panics() {
        let source = "{{ ''[::-1] }}|{{ messages[0].content[::-1] }}|{{ 'abc'[::-1] }}|\
                      {{ 'abc'[5:0:-1] }}|{{ 'abc'[-1:-9:-2] }}|{{ [][::-1] | length }}";
        let t = ChatTemplate::new(source, "", "").unwrap();
        let out = t.render(&[ChatMessage::new("user", "")], false).unwrap();
        assert_eq!(out, "||cba|cb|ca|0");
    }

    /// Operations that do all their work in one step, each of which exhausted memory (minijinja
    /// 2.24) or ran for 9 to 50 s over gigabytes (3.1's own `join` and `tojson`) before
    /// minijinja 3's data-aware fuel and the bounded `join` and `tojson`. Each must fail,
    /// and quickly.
    #[test]
    fn one_step_amplifiers_are_bounded() {
        let doubling = "{% set s = 'xxxxxxxx' %}".to_owned() + &"{% set s = s ~ s %}".repeat(64);
        let sources = [
            "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}\
             {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
            &(doubling + "{{ s | length }}"),
            "{{ ([1] * 1000000000000) | list | length }}",
            "{{ 'x' | indent(10000000000000) }}",
            "{{ [1, 2, 3] | slice(1000000000000) | list }}",
            "{{ ('x' * 100000000) | replace('x', 'xxxxxxxxxx') | length }}",
            "{{ ('x' * 10000).replace('', 'y' * 10000) | length }}",
            "{{ '%999999999999s' | format(1) }}",
            "{{ 'abc' in [1] * 1000000000000000 }}",
            "{{ (['x' * 99999999] * 100) | join | length }}",
            "{{ ([{'a': 'x' * 99999999}] * 100) | join(attribute='a') | length }}",
            "{{ messages | tojson(indent=1000000000) }}",
            "{{ messages | tojson(indent=17) }}",
            "{% set ns = namespace(x=1) %}{% for i in range(50000) %}{% set ns.x = [ns.x] %}\
             {% endfor %}{{ ns.x | tojson(indent=2) | length }}",
            "{{ ([1] * 100000000) | tojson | length }}",
        ];
        for source in sources {
            let t = ChatTemplate::new(source, "", "").unwrap();
            let start = std::time::Instant::now();
            let result = t.render(&[ChatMessage::new("user", "hi")], false);
            assert!(result.is_err(), "{source}: {result:?}");
            assert!(
                start.elapsed().as_secs() < 5,
                "{source}: took {:?}",
                start.elapsed()
            );
        }
    }

    /// The replaced `join`, `tojson` and `namespace` behave as minijinja's own.
    #[test]
    fn replaced_builtins_keep_their_meaning() {
        let messages = [
            ChatMessage::new("system", "s"),
            ChatMessage::new("user", "u"),
        ];
        for (source, expected) in [
            ("{{ ['a', 'b', 3] | join }}", "ab3"),
            ("{{ ['a', 'b'] | join(', ') }}", "a, b"),
            ("{{ ['a', 'b'] | join(d='-') }}", "a-b"),
            (
                "{{ messages | join('/', attribute='role') }}",
                "system/user",
            ),
            ("{{ messages | map(attribute='content') | join }}", "su"),
            ("{{ [[1, 2], 'x'] | join(';') }}", "[1, 2];x"),
            // Maps keep their order, as Python's dicts do: a message's role, its content,
            // then its other fields.
            (
                "{{ messages[0] | tojson }}",
                r#"{"role": "system", "content": "s"}"#,
            ),
            ("{{ {'b': 1, 'a': 2} | tojson }}", r#"{"b": 1, "a": 2}"#),
            (
                "{{ {'a': [1]} | tojson(indent=2) }}",
                "{\n  \"a\": [\n    1\n  ]\n}",
            ),
            ("{{ [1] | tojson(indent=16) | length }}", "21"),
            (
                "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}\
                 {% endfor %}{{ ns.n }}{{ namespace(a=1, b=2).b }}",
                "22",
            ),
        ] {
            let t = ChatTemplate::new(source, "", "").unwrap();
            assert_eq!(t.render(&messages, false).unwrap(), expected, "{source}");
        }
        let t = ChatTemplate::new("{{ 1 | join }}", "", "").unwrap();
        assert!(t.render(&messages, false).is_err());
    }

    /// A value nested as deep as the fuel allows (231,000 lists) printed, serialized and
    /// dropped: each is recursive in minijinja, and overflowed the stack (aborting the process)
    /// before renders ran on a thread of their own. Runs on the test's own 2 MB thread.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn deeply_nested_values_do_not_overflow_the_stack() {
        for tail in ["{{ ns.x }}", "{{ ns.x | tojson }}", "{{ ns.x | length }}"] {
            let source = "{% set ns = namespace(x=1) %}{% for j in range(3) %}\
                          {% for i in range(77000) %}{% set ns.x = [ns.x] %}{% endfor %}\
                          {% endfor %}"
                .to_owned()
                + tail;
            let t = ChatTemplate::new(&source, "", "").unwrap();
            match t.render(&[], false) {
                Ok(text) => assert_eq!(text, "1", "{tail}"),
                Err(e) => assert!(
                    matches!(e, ModelError::ChatTemplateFuel { .. })
                        || e.to_string().contains("nested deeper than"),
                    "{e}"
                ),
            }
        }
    }

    /// Found by fuzzing (a timeout): `tojson` of a namespace that holds itself walked the cycle
    /// as deep as the fuel's bytes allowed, holding an iterator per level: 1 GB and seconds
    /// for one filter call. `tojson` refuses nesting past 256 levels, and since the namespace
    /// guard (`chat/namespace_guard.rs`) the cycle is refused where it would be made.
    #[test]
    fn tojson_of_a_cyclic_value_is_an_error() {
        let cycle = "{% set ns = namespace(sys='') %}{% set ns.sys = ns, 1 %}";
        let started = std::time::Instant::now();
        let t = ChatTemplate::new(&format!("{cycle}{{{{ ns.sys | tojson }}}}"), "", "").unwrap();
        let err = t.render(&[], false).unwrap_err();
        assert!(
            err.to_string()
                .contains("a namespace cannot be stored in a namespace"),
            "{err}"
        );
        assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
        // Nesting real templates use still serializes.
        let nested = "{{ {'a': [{'b': {'c': [1, 2, {'d': 'e'}]}}]} | tojson }}";
        let t = ChatTemplate::new(nested, "", "").unwrap();
        assert_eq!(
            t.render(&[], false).unwrap(),
            r#"{"a": [{"b": {"c": [1, 2, {"d": "e"}]}}]}"#
        );
    }

    /// Found by fuzzing: minijinja 3.1 sliced format strings inside a multi-byte character of a
    /// field (`%(é)s`, `{a[é]}`) and panicked. Such fields are an error; ASCII ones format as
    /// before, and non-ASCII text outside fields is kept.
    #[test]
    fn format_fields_with_multibyte_characters_are_an_error() {
        let messages = [ChatMessage::new("é", "")];
        for source in [
            "{{ '%(é)s' | format({'é': 1}) }}",
            "{{ '%(\u{e9}' | format }}",
            "{{ ('%(' ~ messages[0].role ~ ')s') | format }}",
            "{{ '{a[é]}'.format(a={'é': 1}) }}",
            "{{ '{é}'.format() }}",
        ] {
            let t = ChatTemplate::new(source, "", "").unwrap();
            let err = t.render(&messages, false).unwrap_err();
            assert!(err.to_string().contains("ASCII"), "{source}: {err}");
        }
        for (source, expected) in [
            ("{{ 'é %(x)s' | format(x=2) }}", "é 2"),
            ("{{ '%s-%d é' | format('a', 3) }}", "a-3 é"),
            ("{{ 'é {} {x}'.format(1, x=2) }}", "é 1 2"),
        ] {
            let t = ChatTemplate::new(source, "", "").unwrap();
            assert_eq!(t.render(&messages, false).unwrap(), expected, "{source}");
        }
    }
}
