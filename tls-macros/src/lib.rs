//! Procedural macros of the tls toolkit, re-exported by `tls-runtime`: write a loop as
//! you would sequentially, add an attribute, and its iterations run as ordered
//! speculative epochs with the sequential result, or the build says what to change.
//!
//! Each macro is parse (`ast.rs`, `attr.rs`) -> validate (`valid.rs`, with `scan.rs` and
//! `body.rs` reading the function; every error collected) -> generate (`expand/`, which
//! raises none; one file per rewrite). The rewrites:
//!
//! # `#[tls_loop]`
//!
//! On a function or method. Its one outermost `for` loop (or the loops marked with an
//! inner `#[tls_loop]`) runs as epochs; options `name = "..."`, `threads = <expr>`,
//! `chunk = <int>`, `site = <expr>`.
//!
//! ```text
//! // Before
//! #[tls_loop(threads = 4)]
//! fn f(xs: &[u64], seen: &SpecVec<u64>) -> Result<u64, E> {
//!     let mut total = 0;
//!     for &x in xs {
//!         let y = heavy(x)?;                 // `?` returns from `f`
//!         checkpoint!();                     // sub-thread boundary
//!         seen.set(y as usize % 8, y);
//!         total += y;                        // write-only accumulation
//!         println!("{x} -> {y}");            // printed at commit
//!     }
//!     Ok(total)
//! }
//! // After (simplified)
//! fn f(xs: &[u64], seen: &SpecVec<u64>) -> Result<u64, E> {
//!     let mut total = 0;
//!     {
//!         #[derive(Clone)] enum __TlsSegment<S0, S1> { S0(S0), S1(S1) }
//!         static __TLS_SITE: LoopSite = LoopSite::new();
//!         let __tls_acc_total = &unsafe { Accumulator::new(&mut total) };
//!         let outcome = Loop::new().site(&__TLS_SITE).threads(4).run_segments(
//!             xs,
//!             |item| __TlsSegment::S0(item),
//!             |segment| -> Step<_, Result<u64, E>> {
//!                 match segment {
//!                     __TlsSegment::S0(item) => {
//!                         let &x = item;
//!                         let y = match branch(heavy(x)) {
//!                             Continue(v) => v,
//!                             Break(r) => return Step::Done(Control::Return(from_residual(r))),
//!                         };
//!                         return Step::Checkpoint(__TlsSegment::S1((carry(x), carry(y))));
//!                     }
//!                     __TlsSegment::S1((x, y)) => {
//!                         let x = uncarry(x);
//!                         let y = uncarry(y);
//!                         seen.set(y as usize % 8, y);
//!                         { let v = y; __tls_acc_total.record(move |t| { (*t) += v; }) };
//!                         print_at_commit(Stream::Stdout, format!("{x} -> {y}"), true);
//!                         Step::Done(Control::Continue)
//!                     }
//!                 }
//!             },
//!         );
//!         if let LoopOutcome::Returned(r) = outcome { return r; }
//!     }
//!     Ok(total)
//! }
//! ```
//!
//! Also: `continue` becomes `return Step::Done(Control::Continue)`, `break` (or a
//! labelled `break`/`continue` aimed at this loop) `Control::Break`; loops written in the
//! body poll for a pending violation on their back-edge
//! (`while c { poll(); body }`); `v.push(x)`, `v.extend(xs)` (an iterator argument
//! collected in the epoch), `m.insert(k, v)` as statements on a `mut` outer variable
//! (or one bound to a `&mut` borrow) are recorded like `+=`;
//! `write!(stdout(), ..)` / `writeln!(stderr(), ..)` are delayed like `print!`.
//!
//! Outer variables are found by scope, as rustc resolves names: a name the body binds
//! (`let`, closure parameters, `for` / `match` / `if let` / `while let` / `let else`
//! patterns, a nested `fn`, `const` or `static` item) is a local of the epoch from its
//! binding to the end of its block, arm or closure, so uses of it there are left as
//! written, even when an outer variable of that name is accumulated into elsewhere:
//!
//! ```text
//! // Before
//! total += x;  { let mut total = 1; total += x; }  let mut total = x; total += 1;
//! // After
//! { let v = x; __tls_acc_total.record(move |t| { (*t) += v; }) };
//! { let mut total = 1; total += x; }  let mut total = x; total += 1;
//! ```
//!
//! # `checkpoint!()`
//!
//! A statement at the top level of an epoch loop body: the body is split there, and the
//! locals used after it are carried (cloned by the runtime) into the next segment. It
//! expands to nothing by itself: used anywhere else it is a compile error.
//!
//! # `#[escape]`, `#[escape(check = f)]`, `#[on_violation(undo)]`
//!
//! ```text
//! // Before
//! #[escape(check = page_exists)]
//! #[on_violation(put_page)]
//! fn get_page(id: PageId) -> Page { body }
//! // After
//! fn get_page(id: PageId) -> Page {
//!     static __TLS_ESCAPE_LOCK: EscapeLock = EscapeLock::new();
//!     if !escape_check(|| verdict((page_exists)(&id))) { return escape_skipped(); }
//!     let ret = escape(&__TLS_ESCAPE_LOCK, || -> Page { body });
//!     if is_speculative() { undo_with(&ret, undo_action(&ret, put_page)); }
//!     ret
//! }
//! ```
//!
//! The check receives the arguments by shared reference (references as they are); the
//! undo action is called with `&` a copy of the return value, so the return type must be
//! `Clone + Send + 'static` and the action `FnOnce(&R) + Send + 'static`.
//!
//! # `#[on_commit]`
//!
//! ```text
//! // Before
//! #[on_commit]
//! fn put_page(page: Page) { body }
//! // After
//! fn put_page(page: Page) { delay_call(move || -> () { body }) }
//! ```
//!
//! Only on functions returning `()`; the arguments move into the delayed call, so they
//! must be `Send + 'static`.

mod ast;
mod attr;
mod body;
mod expand;
mod outer;
mod scan;
mod scopes;
mod symbol;
mod valid;

use proc_macro::TokenStream;

/// Runs the function's `for` loop (or the loops marked `#[tls_loop]` inside it) as
/// ordered speculative epochs, with the sequential result.
///
/// Options: `name = "..."` (reports), `threads = <usize expr>`, `chunk = <int>`,
/// `site = <&'static LoopSite expr>` (where the loop keeps what it learned about
/// itself: by default one `static` per loop; a function whose loop behaves
/// differently from one caller to another can take a site per caller).
#[proc_macro_attribute]
pub fn tls_loop(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tls_loop(args.into(), item.into()).into()
}

/// Runs the function non-speculatively even from a speculative epoch, serialized with
/// the other calls of the function; `#[escape(check = f)]` first checks the arguments.
#[proc_macro_attribute]
pub fn escape(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::spec_fn(attr::Kind::Escape, args.into(), item.into()).into()
}

/// Registers an undo action for an escaped call, run if the epoch is rolled back past
/// the call.
#[proc_macro_attribute]
pub fn on_violation(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::spec_fn(attr::Kind::OnViolation, args.into(), item.into()).into()
}

/// Delays the call until the calling epoch commits (at once outside speculation).
#[proc_macro_attribute]
pub fn on_commit(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::spec_fn(attr::Kind::OnCommit, args.into(), item.into()).into()
}

/// A sub-thread boundary at the top level of a `#[tls_loop]` loop body. The enclosing
/// `#[tls_loop]` consumes it; anywhere else it is an error.
#[proc_macro]
pub fn checkpoint(input: TokenStream) -> TokenStream {
    // `#[tls_loop]` leaves `checkpoint!(@consumed)` where it split the body, so that the
    // user's import of the macro counts as used.
    if input.to_string().replace(' ', "") == symbol::CONSUMED {
        return TokenStream::new();
    }
    quote::quote! {
        ::core::compile_error!(
            "`checkpoint!()` can only be used as a statement at the top level of the loop body of a `#[tls_loop]` function"
        )
    }
    .into()
}
