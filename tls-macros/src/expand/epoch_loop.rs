//! `#[tls_loop]`: each epoch loop of the function becomes a `Loop` that runs its
//! iterations as epochs, the body split at its `checkpoint!()`s into the segments of a
//! step closure.

use super::body::{BodyRewriter, acc_ident};
use super::ret::RetKind;
use super::rt::{rt, rt_at};
use crate::ast::LoopFn;
use crate::attr::LoopArgs;
use crate::body::BodyInfo;
use crate::scan::{self, Binding, Mode};
use crate::valid::LoopPlan;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use std::ops::Range;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprForLoop, Stmt, parse_quote};

/// The function with each of its epoch loops (one per plan, in source order)
/// rewritten.
pub(super) fn loop_fn(f: LoopFn, plans: Vec<LoopPlan>) -> TokenStream {
    let LoopFn { mut func, .. } = f;
    let mode = if scan::has_marks(&func.block) {
        Mode::Marked
    } else {
        Mode::Single
    };
    let ret = RetKind::of(&func);
    let mut epochs = EpochLoops {
        mode,
        plans: plans.into_iter(),
        ret,
    };
    epochs.visit_block_mut(&mut func.block);
    func.into_token_stream()
}

/// Replaces each epoch loop of the function, found as `scan::Finder` finds them.
struct EpochLoops {
    mode: Mode,
    plans: std::vec::IntoIter<LoopPlan>,
    ret: RetKind,
}

impl VisitMut for EpochLoops {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::ForLoop(l) = e {
            let selected = match self.mode {
                Mode::Marked => scan::marked(&l.attrs).is_some(),
                Mode::Single => true,
            };
            if selected {
                if let Some(plan) = self.plans.next() {
                    let l = l.clone();
                    *e = Expr::Verbatim(epoch_loop(l, plan, &self.ret));
                }
                return;
            }
        }
        visit_mut::visit_expr_mut(self, e);
    }
    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
    fn visit_expr_async_mut(&mut self, _: &mut syn::ExprAsync) {}
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// One epoch loop.
///
/// ```text
/// // Before
/// for PAT in ITEMS { A; checkpoint!(); B }
/// // After
/// {
///     #[derive(Clone)] enum __TlsSegment<S0, S1> { S0(S0), S1(S1) }
///     static __TLS_SITE: LoopSite = LoopSite::new();
///     let __tls_items = epoch_items(ITEMS);
///     shared_with_epochs(&v);                                         // per variable read
///     let __tls_acc_total = unsafe { Accumulator::new(&mut total) }; // per accumulated variable
///     let __tls_outcome = Loop::new().site(&__TLS_SITE) /* .name .threads .chunk */
///         .run_segments(__tls_items, |item| __TlsSegment::S0(item), |segment| -> Step<_, R> {
///             match segment {
///                 __TlsSegment::S0(item) => {
///                     let PAT = item; A;
///                     return Step::Checkpoint(__TlsSegment::S1((carry(local),)));
///                 }
///                 __TlsSegment::S1((local,)) => { let local = uncarry(local); B; Step::Done(Control::Continue) }
///             }
///         });
///     if let LoopOutcome::Returned(r) = __tls_outcome { return r; }
/// }
/// ```
fn epoch_loop(l: ExprForLoop, plan: LoopPlan, ret: &RetKind) -> TokenStream {
    let rt = rt();
    let LoopPlan {
        args,
        body,
        ref_mut_names,
    } = plan;
    let reborrowed: Vec<Ident> = body
        .accumulated
        .iter()
        .filter(|v| ref_mut_names.contains(&v.to_string()))
        .cloned()
        .collect();
    let BodyInfo {
        accumulated,
        returns,
        carried,
        shared,
        ..
    } = body;
    let for_span = l.for_token.span;
    let segments = Segments {
        stmts: &l.body.stmts,
        ranges: scan::segments(&l.body.stmts),
        carried: &carried,
        pat: &l.pat,
        label: l.label.as_ref().map(|lb| lb.name.ident.to_string()),
        accumulated: &accumulated,
        reborrowed: &reborrowed,
    };
    let arms: Vec<TokenStream> = (0..segments.len()).map(|k| segments.arm(k)).collect();
    let r_ty = if returns {
        ret.tokens()
    } else {
        quote!(::core::convert::Infallible)
    };

    let segment_enum = segment_enum(arms.len());
    let items = checked_items(&l.expr);
    let shared_checks = shared_checks(&shared);
    let acc_lets = accumulator_lets(&accumulated, &reborrowed);
    let rt_for = rt_at(for_span);
    let new_loop = quote_spanned!(for_span=> #rt_for::Loop::new());
    // The loop's adaptive state: the site the caller names, else a static of its own.
    let (site_static, site) = match &args.site {
        Some(expr) => {
            let span = syn::spanned::Spanned::span(expr);
            (quote!(), quote_spanned!(span=> #rt::site_ref(#expr)))
        }
        None => (
            quote!(static __TLS_SITE: #rt::LoopSite = #rt::LoopSite::new();),
            quote!(&__TLS_SITE),
        ),
    };
    let options = loop_options(args);
    let step = step_closure(for_span, &arms, &r_ty);
    let after = outcome_after_loop(returns);

    quote! {
        {
            #segment_enum
            #site_static
            // The items first, as the sequential loop evaluates them before the body
            // runs (and before the accumulators borrow their variables).
            let __tls_items = #items;
            #shared_checks
            #acc_lets
            let __tls_outcome = #new_loop
                .site(#site)
                #options
                .run_segments(
                    __tls_items,
                    |__tls_item| __TlsSegment::S0(__tls_item),
                    #step,
                );
            #after
        }
    }
}

/// The enum of the segments' carried values, one type parameter per segment.
///
/// ```text
/// // Before
/// for PAT in ITEMS { A; checkpoint!(); B }
/// // After
/// #[allow(non_camel_case_types)]
/// #[derive(Clone)]
/// enum __TlsSegment<__S0, __S1> { S0(__S0), S1(__S1) }
/// ```
fn segment_enum(n: usize) -> TokenStream {
    let params: Vec<Ident> = (0..n).map(|k| format_ident!("__S{}", k)).collect();
    let variants: Vec<Ident> = (0..n).map(|k| format_ident!("S{}", k)).collect();
    quote! {
        #[allow(non_camel_case_types)]
        #[derive(Clone)]
        enum __TlsSegment<#(#params),*> {
            #(#variants(#params)),*
        }
    }
}

/// The loop's items, checked to be something epochs can take.
///
/// ```text
/// // Before
/// for PAT in ITEMS
/// // After
/// epoch_items(ITEMS)
/// ```
fn checked_items(items: &Expr) -> TokenStream {
    let items_span = syn::spanned::Spanned::span(items);
    let rt_items = rt_at(items_span);
    quote_spanned!(items_span=> #rt_items::epoch_items(#items))
}

/// A check that each variable the body reads can be shared with the epochs.
///
/// ```text
/// // Before
/// for x in xs { seen.set(x) }
/// // After
/// shared_with_epochs(&xs); shared_with_epochs(&seen);
/// ```
fn shared_checks(shared: &[Ident]) -> TokenStream {
    let checks = shared.iter().map(|v| {
        let rt = rt_at(v.span());
        quote_spanned!(v.span()=> #rt::shared_with_epochs(&#v);)
    });
    quote!(#(#checks)*)
}

/// An accumulator for each variable accumulated into (reborrowing `&mut T`
/// parameters).
///
/// ```text
/// // Before
/// total += x;  out.push(x);               // `out: &mut Vec<T>` a parameter
/// // After
/// let __tls_acc_total = unsafe { Accumulator::new(&mut total) };
/// let __tls_acc_total = &__tls_acc_total;
/// let __tls_acc_out = unsafe { Accumulator::new(&mut *out) };
/// let __tls_acc_out = &__tls_acc_out;
/// ```
fn accumulator_lets(accumulated: &[Ident], reborrowed: &[Ident]) -> TokenStream {
    let rt = rt();
    let lets = accumulated.iter().map(|v| {
        let acc = acc_ident(v);
        let borrow = if reborrowed.contains(v) {
            quote_spanned!(v.span()=> &mut *#v)
        } else {
            quote_spanned!(v.span()=> &mut #v)
        };
        quote! {
            // SAFETY: the accumulator lives in this block, so it outlives the loop below,
            // whose epochs record into it.
            let #acc = unsafe { #rt::Accumulator::new(#borrow) };
            let #acc = &#acc;
        }
    });
    quote!(#(#lets)*)
}

/// The `Loop` builder calls of the attribute's options.
///
/// ```text
/// // Before
/// #[tls_loop(name = "scan", threads = n, chunk = 4)]
/// // After
/// .name("scan").threads(n).chunk(4usize)
/// ```
fn loop_options(args: LoopArgs) -> TokenStream {
    let LoopArgs {
        name,
        threads,
        chunk,
        site: _,
    } = args;
    let name = name.map(|n| {
        let n = n.0;
        quote!(.name(#n))
    });
    let threads = threads.map(|t| {
        let span = syn::spanned::Spanned::span(&t);
        quote_spanned!(span=> .threads(#t))
    });
    let chunk = chunk.map(|c| {
        let c = c.0;
        quote!(.chunk(#c))
    });
    quote!(#name #threads #chunk)
}

/// The step closure: one `match` arm per segment, returning `R` (the function's return
/// type, or `Infallible` when the body cannot return).
///
/// ```text
/// // Before
/// for PAT in ITEMS { A; checkpoint!(); B }
/// // After
/// |__tls_segment| -> Step<__TlsSegment<_, _>, R> {
///     match __tls_segment { ARM0 ARM1 }
/// }
/// ```
fn step_closure(for_span: Span, arms: &[TokenStream], r_ty: &TokenStream) -> TokenStream {
    let rt = rt();
    let holes = arms.iter().map(|_| quote!(_));
    // Spanned at `for`, so that a captured variable that is not `Sync` is reported
    // there rather than on the attribute.
    quote_spanned! {for_span=>
        |__tls_segment| -> #rt::Step<__TlsSegment<#(#holes),*>, #r_ty> {
            match __tls_segment {
                #(#arms)*
            }
        }
    }
}

/// What follows the loop: the function returns what an epoch returned.
///
/// ```text
/// // Before
/// for x in xs { return r; }       // with no `return` or `?`: `match __tls_never {}`
/// // After
/// if let LoopOutcome::Returned(__tls_returned) = __tls_outcome { return __tls_returned; }
/// ```
fn outcome_after_loop(returns: bool) -> TokenStream {
    let rt = rt();
    if returns {
        quote! {
            if let #rt::LoopOutcome::Returned(__tls_returned) = __tls_outcome {
                return __tls_returned;
            }
        }
    } else {
        quote! {
            if let #rt::LoopOutcome::Returned(__tls_never) = __tls_outcome {
                match __tls_never {}
            }
        }
    }
}

/// The loop body, split at its `checkpoint!()`s.
struct Segments<'a> {
    /// The body's statements, `checkpoint!()`s included.
    stmts: &'a [Stmt],
    /// The statements of each segment.
    ranges: Vec<Range<usize>>,
    /// The locals carried across each checkpoint.
    carried: &'a [Vec<Binding>],
    /// The loop's pattern, bound at the start of the first segment.
    pat: &'a syn::Pat,
    label: Option<String>,
    accumulated: &'a [Ident],
    reborrowed: &'a [Ident],
}

impl Segments<'_> {
    fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether segment `k` ends at a checkpoint (rather than at the end of the body).
    fn ends_at_checkpoint(&self, k: usize) -> bool {
        k + 1 < self.len()
    }

    /// The `match` arm of segment `k`.
    ///
    /// ```text
    /// // Before
    /// A; checkpoint!(); B
    /// // After (k = 1)
    /// __TlsSegment::S1((__tls_carried_0,)) => {
    ///     let local = uncarry(__tls_carried_0);
    ///     B;
    ///     Step::Done(Control::Continue)
    /// }
    /// ```
    fn arm(&self, k: usize) -> TokenStream {
        let (pattern, prelude) = self.entry(k);
        let stmts = self.rewritten_stmts(k);
        let consumed = self.consumed_checkpoint(k);
        let tail = self.exit(k);
        quote! {
            #pattern => {
                #prelude
                #(#stmts)*
                #consumed
                #tail
            }
        }
    }

    /// The arm's pattern, and the statements that bind what it receives: the loop's
    /// item in the first segment, the carried locals in the others.
    ///
    /// ```text
    /// // Before
    /// for PAT in ITEMS { A; checkpoint!(); B }          // `local` bound in A, used in B
    /// // After
    /// __TlsSegment::S0(__tls_item) => { let PAT = epoch_item(__tls_item); ..
    /// __TlsSegment::S1((__tls_carried_0,)) => { let local = uncarry(__tls_carried_0); ..
    /// ```
    fn entry(&self, k: usize) -> (TokenStream, TokenStream) {
        let rt = rt();
        if k == 0 {
            let pat = self.pat;
            return (
                quote!(__TlsSegment::S0(__tls_item)),
                quote!(let #pat = #rt::epoch_item(__tls_item);),
            );
        }
        let variant = format_ident!("S{}", k);
        let carried = &self.carried[k - 1];
        let names: Vec<Ident> = (0..carried.len())
            .map(|i| format_ident!("__tls_carried_{}", i))
            .collect();
        let lets = carried.iter().zip(&names).map(|(b, c)| {
            let Binding { ident, mutable } = b;
            let m = mutable.then(|| quote!(mut));
            quote! {
                #[allow(unused_mut, unused_variables)]
                let #m #ident = #rt::uncarry(#c);
            }
        });
        (
            quote!(__TlsSegment::#variant((#(#names,)*))),
            quote!(#(#lets)*),
        )
    }

    /// The segment's statements, rewritten by `BodyRewriter`.
    fn rewritten_stmts(&self, k: usize) -> Vec<Stmt> {
        let scopes = crate::scopes::Scopes::loop_body(self.pat, self.stmts, self.ranges[k].start);
        let mut rewriter = BodyRewriter::new(
            self.label.clone(),
            self.accumulated,
            self.reborrowed,
            scopes,
        );
        let mut stmts: Vec<Stmt> = self.stmts[self.ranges[k].clone()].to_vec();
        let carried_later: Vec<&Binding> = self.carried[k.min(self.carried.len())..]
            .iter()
            .flatten()
            .collect();
        for s in &mut stmts {
            // A `let mut` whose local is mutated only after a checkpoint looks unused-mut
            // here; the mutation happens on the carried copy.
            if let Stmt::Local(local) = s {
                let mut bound = Vec::new();
                scan::pat_bindings(&local.pat, &mut bound);
                if bound
                    .iter()
                    .any(|b| b.mutable && carried_later.iter().any(|c| c.ident == b.ident))
                {
                    local.attrs.push(parse_quote!(#[allow(unused_mut)]));
                }
            }
            rewriter.visit_stmt_mut(s);
            // Statements follow, so a trailing expression needs its `;`.
            if let Stmt::Expr(_, semi @ None) = s {
                *semi = Some(Default::default());
            }
        }
        stmts
    }

    /// The checkpoint that ends segment `k`, left consumed.
    ///
    /// ```text
    /// // Before
    /// checkpoint!();
    /// // After
    /// checkpoint!(@consumed);   // expands to nothing; keeps the import used
    /// ```
    fn consumed_checkpoint(&self, k: usize) -> Option<TokenStream> {
        if !self.ends_at_checkpoint(k) {
            return None;
        }
        scan::checkpoint_stmt(&self.stmts[self.ranges[k].end]).map(|m| {
            let path = &m.path;
            quote!(#path!(@consumed);)
        })
    }

    /// How segment `k` ends: carrying its locals into the next segment, or done with
    /// the iteration.
    ///
    /// ```text
    /// // Before
    /// A; checkpoint!(); B
    /// // After
    /// A; return Step::Checkpoint(__TlsSegment::S1((carry(local),)));
    /// B; Step::Done(Control::Continue)
    /// ```
    ///
    /// The step is bound by a `let` that allows unreachable code: after a body (or
    /// segment) that ends in `return`, `break` or a panic, the plain loop has nothing
    /// unreachable, and a `-D warnings` build must not fail on what the macro adds.
    /// Unreachable code of the user's own still comes first and is still reported.
    fn exit(&self, k: usize) -> TokenStream {
        let rt = rt();
        if !self.ends_at_checkpoint(k) {
            return quote! {
                #[allow(unreachable_code)]
                let __tls_step = #rt::Step::Done(#rt::Control::Continue);
                __tls_step
            };
        }
        let next = format_ident!("S{}", k + 1);
        let carry = self.carried[k].iter().map(|b| {
            let ident = &b.ident;
            let rt = rt_at(ident.span());
            quote_spanned!(ident.span()=> #rt::carry(#ident))
        });
        quote! {
            #[allow(unreachable_code)]
            let __tls_step = #rt::Step::Checkpoint(__TlsSegment::#next((#(#carry,)*)));
            return __tls_step;
        }
    }
}
