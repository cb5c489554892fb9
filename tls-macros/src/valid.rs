//! Checks, collected so that one build shows every problem (serde's `Ctxt`). Nothing
//! here changes the code; what passes goes to `expand/` as a plan.

use crate::ast::{LoopFn, SpecFn, SpecPlan};
use crate::attr::{self, EscapeArgs, Kind, LoopArgs};
use crate::body::{self, BodyInfo};
use crate::outer;
use crate::scan::{self, Finder, Mode};

/// Collected errors.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
    fn spanned(&mut self, tokens: impl quote::ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, msg));
    }
    fn finish<T>(self, ok: T) -> syn::Result<T> {
        self.0.map_or(Ok(ok), Err)
    }
}

/// One epoch loop, checked: its options and what its body does.
pub(crate) struct LoopPlan {
    pub(crate) args: LoopArgs,
    /// `&mut T` parameters and locals bound to a `&mut` borrow (accumulated through
    /// `&mut *p`).
    pub(crate) ref_mut_names: std::collections::BTreeSet<String>,
    pub(crate) body: BodyInfo,
}

/// Checks a `#[tls_loop]` function; returns the plan of each epoch loop, in source
/// order.
pub(crate) fn tls_loop(f: &LoopFn) -> syn::Result<Vec<LoopPlan>> {
    let mut errors = Errors::default();
    let sig = &f.func.sig;
    if let Some(a) = &sig.asyncness {
        errors.spanned(
            a,
            "`#[tls_loop]` cannot be used on an `async fn`: epochs run on other threads and \
             cannot suspend; move the loop into a plain `fn` called from the async code",
        );
    }
    if let Some(c) = &sig.constness {
        errors.spanned(
            c,
            "`#[tls_loop]` cannot be used on a `const fn`: speculative loops run at run time; \
             remove `const` or the attribute",
        );
    }
    let finder = Finder::find(&f.func.block);
    for (mark, keyword) in &finder.bad_marks {
        errors.spanned(mark, body::only_for(keyword));
    }
    for m in &finder.stray_checkpoints {
        errors.spanned(
            m,
            "`checkpoint!()` must be a statement at the top level of the body of the loop that \
             `#[tls_loop]` runs as epochs; this one is outside that loop",
        );
    }
    let name = &sig.ident;
    match (finder.mode, finder.selected.len()) {
        (Mode::Single, 0) => errors.spanned(
            name,
            format!(
                "`#[tls_loop]` found no `for` loop in `{name}`: it runs the iterations of a \
                 `for` loop of the function as epochs"
            ),
        ),
        (Mode::Single, n) if n > 1 => {
            for extra in &finder.selected[1..] {
                errors.spanned(
                    extra.for_token,
                    format!(
                        "`{name}` has several `for` loops, so `#[tls_loop]` does not know which \
                         to run as epochs; mark the chosen loop(s) with `#[tls_loop]` \
                         (`#[tls_loop] for x in ...`)"
                    ),
                );
            }
        }
        _ => {}
    }
    if finder.selected.len() > 1
        && let Some(site) = &f.args.site
    {
        // One site is one loop's learned state: shared by several loops, each would
        // run on what the others taught it.
        errors.spanned(
            site,
            "`site` on a function whose `#[tls_loop]` marks several loops would give them \
             all one site; put `site = ...` on each marked loop's own `#[tls_loop]` instead"
                .to_string(),
        );
    }
    let outer_muts = outer::outer_mut_names(&f.func, &finder.selected);
    let variables = outer::fn_variables(&f.func);
    let mut plans = Vec::new();
    let several = finder.selected.len() > 1;
    for (k, l) in finder.selected.iter().enumerate() {
        let own = match scan::marked(&l.attrs) {
            None => LoopArgs::default(),
            Some(mark) => attr::args_of(mark)
                .and_then(LoopArgs::parse)
                .unwrap_or_else(|e| {
                    errors.push(e);
                    LoopArgs::default()
                }),
        };
        let unnamed = own.name.is_none();
        let mut args = own.or(&f.args);
        if several && unnamed {
            // The function's `name` names each marked loop that has none of its
            // own, numbered in source order: one name for all would merge their
            // reports (`TLS_REPORT` aggregates runs by name).
            args.name = args
                .name
                .map(|n| attr::LoopName(format!("{} #{}", n.0, k + 1)));
        }
        for (call, name) in scan::thread_starts(&l.body) {
            errors.spanned(call, thread_start_message(&name));
        }
        let mut info = body::analyze(l, &outer_muts, &variables);
        for e in info.errors.drain(..) {
            errors.push(e);
        }
        plans.push(LoopPlan {
            args,
            ref_mut_names: outer::ref_mut_names(&f.func, &finder.selected),
            body: info,
        });
    }
    errors.finish(plans)
}

/// Why a call that starts threads cannot be in a loop body, and what to do.
fn thread_start_message(name: &str) -> String {
    format!(
        "`{name}` in a `#[tls_loop]` body: threads started by an iteration run outside its \
         epoch, so what they write to speculative data is neither kept back until the \
         iteration commits nor undone when it rolls back, and the result can differ from the \
         sequential loop's; start them with `tls_runtime::scope` instead (it runs them once \
         every earlier iteration has committed; `tls_runtime::when_homefree(|| ..)` does \
         the same for any call), before or after the loop, or from an `#[on_commit]` \
         function (it runs when the iteration commits)"
    )
}

/// Checks the speculation attributes of a function.
pub(crate) fn spec_fn(f: &SpecFn) -> syn::Result<SpecPlan> {
    let mut errors = Errors::default();
    let mut plan = SpecPlan {
        escape: None,
        undo: None,
        on_commit: false,
    };
    let mut seen: Vec<Kind> = Vec::new();
    for a in &f.attrs {
        if seen.contains(&a.kind) {
            errors.push(a.error(format!(
                "duplicate `#[{}]` attribute; remove this one",
                a.kind.name()
            )));
            continue;
        }
        seen.push(a.kind);
        match a.kind {
            Kind::Escape => match EscapeArgs::parse(a.args.clone()) {
                Ok(args) => plan.escape = Some(args),
                Err(e) => errors.push(e),
            },
            Kind::OnViolation => match attr::parse_undo(a.args.clone(), || {
                a.error(
                    "`#[on_violation]` needs an undo action: `#[on_violation(put_page)]` or \
                     `#[on_violation(|ret| ...)]`, called with `&` the return value",
                )
            }) {
                Ok(undo) => plan.undo = Some(undo),
                Err(e) => errors.push(e),
            },
            Kind::OnCommit => {
                if !a.args.is_empty() {
                    errors.spanned(&a.args, "`#[on_commit]` takes no options");
                }
                plan.on_commit = true;
            }
        }
    }
    let find = |k: Kind| f.attrs.iter().find(|a| a.kind == k);
    if let (Some(a), None) = (find(Kind::OnViolation), find(Kind::Escape)) {
        errors.push(a.error(
            "`#[on_violation]` undoes an escaped call, so it needs `#[escape]` on the same \
             function; add `#[escape]`, or use `#[on_commit]` to delay the call instead",
        ));
    }
    if let (Some(a), Some(_)) = (find(Kind::OnCommit), find(Kind::Escape)) {
        errors.push(a.error(
            "`#[on_commit]` and `#[escape]` cannot be combined: an escaped call runs at once, \
             an `#[on_commit]` call runs when the epoch commits; keep one",
        ));
    }
    let sig = &f.func.sig;
    let what = f.attrs[0].kind.name();
    if let Some(a) = &sig.asyncness {
        errors.spanned(a, format!("`#[{what}]` cannot be used on an `async fn`"));
    }
    if let Some(c) = &sig.constness {
        errors.spanned(c, format!("`#[{what}]` cannot be used on a `const fn`"));
    }
    if plan.on_commit {
        if let syn::ReturnType::Type(_, ty) = &sig.output {
            let unit = matches!(&**ty, syn::Type::Tuple(t) if t.elems.is_empty());
            if !unit {
                errors.spanned(
                    ty,
                    "an `#[on_commit]` function must return `()`: its call runs when the epoch \
                     commits, after the caller has gone on; return nothing, or use `#[escape]` \
                     to run it at once",
                );
            }
        }
        for arg in &sig.inputs {
            match arg {
                // `&self`, `&mut self`, or the same written out (`self: &Self`,
                // `self: Pin<&mut Self>`).
                syn::FnArg::Receiver(r)
                    if match &r.kind {
                        syn::ReceiverKind::Reference(..) => true,
                        syn::ReceiverKind::Typed(_, ty) => borrowed(ty).is_some(),
                        _ => false,
                    } =>
                {
                    errors.spanned(
                        r,
                        "an `#[on_commit]` method cannot borrow `self`: its arguments are moved \
                         into a call that runs when the epoch commits, so they must be `Send + \
                         'static`; take `self` by value (e.g. `self: Arc<Self>`) or make it a free \
                         function",
                    )
                }
                syn::FnArg::Typed(t) => {
                    if let Some(r) = borrowed(&t.ty) {
                        errors.spanned(
                            r,
                            "the arguments of an `#[on_commit]` function are moved into a call \
                             that runs when the epoch commits, so they must be `Send + 'static`; \
                             pass owned data or a `&'static` reference",
                        );
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(EscapeArgs { check: Some(_) }) = &plan.escape {
        for arg in &sig.inputs {
            if let syn::FnArg::Typed(t) = arg
                && !matches!(&*t.pat, syn::Pat::Ident(_))
            {
                errors.spanned(
                    &t.pat,
                    "`#[escape(check = ...)]` passes each parameter to the check by name; \
                         bind this parameter to a name and destructure it in the body",
                );
            }
        }
    }
    if plan.undo.is_some()
        && let syn::ReturnType::Type(_, ty) = &sig.output
        && let Some(r) = borrowed(ty)
    {
        errors.spanned(
            r,
            "an `#[on_violation]` function must return an owned value: the undo action gets a \
             copy of it, possibly after this borrow has ended; return an id or an `Arc` instead",
        );
    }
    errors.finish(plan)
}

/// A reference type without `'static` in `ty`, if any.
fn borrowed(ty: &syn::Type) -> Option<&syn::TypeReference> {
    use syn::visit::Visit;
    struct Find<'a>(Option<&'a syn::TypeReference>);
    impl<'a> Visit<'a> for Find<'a> {
        fn visit_type_reference(&mut self, r: &'a syn::TypeReference) {
            let is_static = r.lifetime.as_ref().is_some_and(|l| l.ident == "static");
            if !is_static && self.0.is_none() {
                self.0 = Some(r);
            }
            syn::visit::visit_type_reference(self, r);
        }
    }
    let mut f = Find(None);
    f.visit_type(ty);
    f.0
}
