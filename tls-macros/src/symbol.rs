//! Names the macros recognize, in one place.

/// `#[tls_loop]`, on a function or on a loop inside it.
pub(crate) const TLS_LOOP: &str = "tls_loop";
/// `checkpoint!()`.
pub(crate) const CHECKPOINT: &str = "checkpoint";
/// What `#[tls_loop]` leaves in place of a `checkpoint!()` it consumed.
pub(crate) const CONSUMED: &str = "@consumed";
/// `#[escape]`.
pub(crate) const ESCAPE: &str = "escape";
/// `#[on_violation(undo)]`.
pub(crate) const ON_VIOLATION: &str = "on_violation";
/// `#[on_commit]`.
pub(crate) const ON_COMMIT: &str = "on_commit";

/// `#[tls_loop(name = "...")]`.
pub(crate) const NAME: &str = "name";
/// `#[tls_loop(threads = expr)]`.
pub(crate) const THREADS: &str = "threads";
/// `#[tls_loop(chunk = n)]`.
pub(crate) const CHUNK: &str = "chunk";
/// `#[tls_loop(site = expr)]`.
pub(crate) const SITE: &str = "site";
/// Every `#[tls_loop]` option.
pub(crate) const LOOP_OPTIONS: &[&str] = &[NAME, THREADS, CHUNK, SITE];

/// Calls that start threads, as the last two segments of their path
/// (`std::thread::spawn`, `thread::scope`, `rayon::join`): refused in a loop body,
/// since the threads would run outside the iteration's epoch.
pub(crate) const THREAD_STARTS: &[(&str, &str)] = &[
    ("thread", "spawn"),
    ("thread", "scope"),
    ("rayon", "spawn"),
    ("rayon", "spawn_fifo"),
    ("rayon", "scope"),
    ("rayon", "scope_fifo"),
    ("rayon", "join"),
];

/// The runtime's plain functions whose closure runs outside speculation (at commit,
/// escaped, as an undo action, or once the iteration is homefree): a thread started
/// there is not the epoch's, so the check of [`THREAD_STARTS`] skips their arguments.
pub(crate) const NON_SPECULATIVE_CALLS: &[&str] = &[
    "on_commit",
    "escape",
    "escape_checked",
    "on_violation",
    "when_homefree",
];

/// `tls_runtime::scope`: [`std::thread::scope`] once the iteration is homefree. Only
/// with its crate's name in the path, since a bare `scope` may be any other.
pub(crate) const RUNTIME_SCOPE: (&str, &str) = ("tls_runtime", "scope");

/// `#[escape(check = path)]`.
pub(crate) const CHECK: &str = "check";
/// Every `#[escape]` option.
pub(crate) const ESCAPE_OPTIONS: &[&str] = &[CHECK];

/// Print macros whose output is delayed to commit, and the stream each writes to.
pub(crate) const PRINT_MACROS: &[(&str, Stream, bool)] = &[
    ("print", Stream::Stdout, false),
    ("println", Stream::Stdout, true),
    ("eprint", Stream::Stderr, false),
    ("eprintln", Stream::Stderr, true),
];

/// `write!` / `writeln!`: delayed when they write to `stdout()` or `stderr()`.
pub(crate) const WRITE_MACROS: &[(&str, bool)] = &[("write", false), ("writeln", true)];

/// Standard macros whose arguments are expressions separated by commas: a `?` or
/// `return` in them is rewritten as in the loop body (`println!("{}", s.parse()?)`).
pub(crate) const EXPRESSION_MACROS: &[&str] = &[
    "print",
    "println",
    "eprint",
    "eprintln",
    "format",
    "format_args",
    "write",
    "writeln",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
    "dbg",
];

/// Standard stream constructors recognized as the target of `write!`.
pub(crate) const STREAMS: &[(&str, Stream)] =
    &[("stdout", Stream::Stdout), ("stderr", Stream::Stderr)];

/// Methods that, called as a statement on a `mut` variable declared outside the loop,
/// are write-only accumulations.
pub(crate) const ACCUMULATING_METHODS: &[&str] = &[
    "push",
    "push_str",
    "push_back",
    "push_front",
    "extend",
    "extend_from_slice",
    "insert",
];

/// Of [`ACCUMULATING_METHODS`], those that copy from what they are given, so that the
/// sequential call may borrow the iteration's own data (see the expansion's
/// `record_method`).
pub(crate) const COPYING_APPENDS: &[&str] = &["push_str", "extend_from_slice", "extend"];

/// An output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// Lists names as "`a`, `b`, `c`" for error messages.
pub(crate) fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
