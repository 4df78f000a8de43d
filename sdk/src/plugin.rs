//! The `Plugin` trait a plugin implements, and the `export!` macro that makes a type the
//! component's `handler` export.

use crate::bindings::exports::forewarn::plugin::handler::Guest;
use crate::{Context, Decision, Event, Phase, StartContext};

/// What a forewarn plugin implements. Register the type with [`export!`](crate::export).
///
/// Called for each transition of each event the plugin subscribes to. The answer matters in
/// [`Phase::Prepare`]; in the other phases it is logged and otherwise ignored (return
/// [`Decision::approve()`]).
pub trait Plugin {
    /// Handles one transition of `event`. Answer before `ctx.deadline()`.
    fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision;

    /// Called once per daemon run when the plugin is first loaded, before any `on_event` of
    /// the run: recover what an earlier VM saved elsewhere (`ctx.first_run` says the daemon
    /// found no journal: a new or re-created VM). Does nothing unless overridden.
    fn on_start(ctx: &StartContext) {
        let _ = ctx;
    }
}

/// Adapts a [`Plugin`] to the generated `Guest` trait. Used by [`export!`](crate::export).
#[doc(hidden)]
pub struct Adapter<P>(std::marker::PhantomData<P>);

impl<P: Plugin> Guest for Adapter<P> {
    fn on_event(event: Event, phase: Phase, ctx: Context) -> Decision {
        P::on_event(&event, phase, &ctx)
    }

    fn on_start(ctx: StartContext) {
        P::on_start(&ctx)
    }
}

/// Makes a [`Plugin`] type the component's export: `forewarn_sdk::export!(MyPlugin);`
/// Use it once per plugin crate, at the top level of `lib.rs`.
#[macro_export]
macro_rules! export {
    ($plugin:ty) => {
        // Only a wasm build exports the component functions: their names contain ':', which
        // native linkers reject, and a native build (for `cargo test` of the plugin's logic)
        // has no use for them.
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn(&$crate::Event, $crate::Phase, &$crate::Context) -> $crate::Decision =
            <$plugin as $crate::Plugin>::on_event;
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            // wit-bindgen's export macro wants a plain type name, not a generic path.
            type ForewarnPluginExport = $crate::__private::Adapter<$plugin>;
            $crate::bindings::__export_event_handler!(
                ForewarnPluginExport with_types_in $crate::bindings
            );
        };
    };
}
