//! What a chat template render leaves allocated, counted by this binary's global allocator (the
//! only test here, so no other test allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use runahead_model::{ChatMessage, ChatTemplate};

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Found by fuzzing (fuzz/, target chat_template, LeakSanitizer): a namespace that holds itself
/// is a reference cycle minijinja never frees, so every render of such a template leaked what
/// the namespace held (here 10 MB a render; a page renders once per turn). Renders must leave
/// nothing behind, whether they succeed or fail. (Since the namespace guard refuses storing a
/// namespace in a namespace, the cycles are refused where they would be made; the renders that
/// try must still leave nothing behind.)
#[test]
fn renders_free_namespace_cycles() {
    let messages = [ChatMessage::new("user", "hi")];
    for (source, ok) in [
        (
            "{% set ns = namespace(big='x' * 10000000) %}{% set ns.me = ns %}{{ ns.big | length }}",
            false,
        ),
        (
            "{% set ns = namespace(big='x' * 10000000) %}{% set ns.n = ns.big | length %}{{ ns.n }}",
            true,
        ),
        (
            "{% set a = namespace(big='x' * 10000000) %}{% set b = namespace(a=a) %}\
             {% set a.b = [b] %}{{ raise_exception('after the cycle') }}",
            false,
        ),
    ] {
        let template = ChatTemplate::new(source, "", "").unwrap();
        // The first render may set up lazily initialized state that stays.
        assert_eq!(template.render(&messages, false).is_ok(), ok, "{source}");
        let before = LIVE.load(Ordering::Relaxed);
        for _ in 0..5 {
            assert_eq!(template.render(&messages, false).is_ok(), ok, "{source}");
        }
        let leaked = LIVE.load(Ordering::Relaxed) - before;
        assert!(
            leaked < 1 << 20,
            "{source}: {leaked} bytes still allocated after 5 renders"
        );
    }
}
