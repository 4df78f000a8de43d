//! Components generated here rather than built from a guest crate: a Rust guest cannot have
//! several linear memories. `many_memories` is a core module written with wasm-encoder,
//! wrapped into a component of forewarn's world by wit-component (`wrap_core_module`).

use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, MemArg, MemorySection, MemoryType, Module, TypeSection, ValType,
};

/// Bytes of one wasm page.
pub const WASM_PAGE: u64 = 64 * 1024;
/// Where the (zeroed) answer lies in memory 0: tag 0 of `decision` is `approve`.
const ANSWER_ADDRESS: i32 = 16;
/// Where `cabi_realloc` starts handing out memory 0.
const HEAP_START: i32 = 1024;
/// The WIT the components are made of: the latest contract.
const WIT: &str = include_str!("../../wit/forewarn.wit");

/// The export name of the handler's `function` in the core module, as wit-component expects
/// it: `forewarn:plugin/handler@<the WIT's package version>#<function>`.
fn handler_export(function: &str) -> String {
    let version = WIT
        .lines()
        .find_map(|line| line.trim().strip_prefix("package forewarn:plugin@"))
        .and_then(|rest| rest.strip_suffix(';'))
        .expect("wit/forewarn.wit declares `package forewarn:plugin@VERSION;`");
    format!("forewarn:plugin/handler@{version}#{function}")
}

/// The shape of a many-memories component: memory 0 (exported, for the canonical ABI) and
/// `extra_memories` more, each `initial_pages` large when the instance is made.
#[derive(Debug, Clone, Copy)]
pub struct ManyMemories {
    /// Linear memories besides memory 0.
    pub extra_memories: u32,
    /// The initial size of each extra memory, in wasm pages.
    pub initial_pages: u32,
    /// Pages each call grows each extra memory by (0: none); a refused growth traps.
    pub grow_pages: u32,
    /// Whether `on-start` touches the memories too (else it does nothing).
    pub touch_on_start: bool,
}

impl ManyMemories {
    /// The bytes of one extra memory after a call grew it.
    pub fn bytes_per_memory(&self) -> u64 {
        u64::from(self.initial_pages + self.grow_pages) * WASM_PAGE
    }

    /// The component: `on-event` grows each extra memory by `grow_pages`, writes to every
    /// 4 KiB page of it (so the pages are really resident) and approves; `on-start` does
    /// the same when `touch_on_start`.
    pub fn component(&self) -> Vec<u8> {
        wrap_core_module(WIT, "event-handler", self.core_module())
    }

    fn core_module(&self) -> Vec<u8> {
        let i32 = ValType::I32;
        let mut types = TypeSection::new();
        types.ty().function([i32; 4], [i32]); // 0: cabi_realloc
        types.ty().function([i32], [i32]); // 1: on-event
        // 2: on-start(vm-name ptr, len, priority, eviction-policy tag, value, first-run, deadline)
        types
            .ty()
            .function([i32, i32, i32, i32, i32, i32, ValType::I64], []);
        let mut functions = FunctionSection::new();
        functions.function(0);
        functions.function(1);
        functions.function(2);
        let mut memories = MemorySection::new();
        memories.memory(memory_of(2));
        for _ in 0..self.extra_memories {
            memories.memory(memory_of(u64::from(self.initial_pages)));
        }
        let globals = heap_global(HEAP_START);
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        exports.export("cabi_realloc", ExportKind::Func, 0);
        exports.export(&handler_export("on-event"), ExportKind::Func, 1);
        exports.export(&handler_export("on-start"), ExportKind::Func, 2);
        let mut code = CodeSection::new();
        code.function(&bump_realloc());
        code.function(&self.touch_every_memory(true));
        code.function(&self.touch_every_memory(false));
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&memories)
            .section(&globals)
            .section(&exports)
            .section(&code);
        module.finish()
    }

    /// `on-event(args) -> answer` (`answers`) or `on-start(…)`: grows and touches every
    /// extra memory (on-start only when `touch_on_start`, and without growing).
    fn touch_every_memory(&self, answers: bool) -> Function {
        // The first local after the parameters: on-event has 1, on-start 7.
        let page_local = if answers { 1 } else { 7 };
        let mut function = Function::new([(1, ValType::I32)]);
        let mut sink = function.instructions();
        let touches = answers || self.touch_on_start;
        for memory in 1..=self.extra_memories {
            if !touches {
                break;
            }
            if answers && self.grow_pages > 0 {
                let pages = i32::try_from(self.grow_pages).expect("few pages");
                sink.i32_const(pages)
                    .memory_grow(memory)
                    .i32_const(-1)
                    .i32_eq()
                    .if_(BlockType::Empty)
                    .unreachable()
                    .end();
            }
            touch_pages(&mut sink, memory, page_local);
        }
        if answers {
            sink.i32_const(ANSWER_ADDRESS);
        }
        sink.end();
        function
    }
}

/// Writes a byte to every 4 KiB page of `memory`, from 0 to its current size.
fn touch_pages(sink: &mut wasm_encoder::InstructionSink<'_>, memory: u32, local: u32) {
    let store = MemArg {
        offset: 0,
        align: 0,
        memory_index: memory,
    };
    // Nothing to touch in an empty memory.
    sink.memory_size(memory)
        .i32_eqz()
        .if_(BlockType::Empty)
        .else_()
        .i32_const(0)
        .local_set(local)
        .loop_(BlockType::Empty)
        .local_get(local)
        .i32_const(1)
        .i32_store8(store)
        .local_get(local)
        .i32_const(4096)
        .i32_add()
        .local_tee(local)
        // bytes = memory.size << 16
        .memory_size(memory)
        .i32_const(16)
        .i32_shl()
        .i32_lt_u()
        .br_if(0)
        .end()
        .end();
}

/// A 32-bit linear memory of `pages` wasm pages at start, without a maximum.
pub fn memory_of(pages: u64) -> MemoryType {
    MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    }
}

/// The global section of a bump allocator: one mutable i32 starting at `start`.
pub fn heap_global(start: i32) -> GlobalSection {
    let mut globals = GlobalSection::new();
    let heap = GlobalType {
        val_type: ValType::I32,
        mutable: true,
        shared: false,
    };
    globals.global(heap, &ConstExpr::i32_const(start));
    globals
}

/// `cabi_realloc(old, old_size, align, new_size)`: a bump allocator over memory 0.
fn bump_realloc() -> Function {
    let mut function = Function::new([(1, ValType::I32)]);
    function
        .instructions()
        // aligned = (heap + align - 1) & -align
        .global_get(0)
        .local_get(2)
        .i32_add()
        .i32_const(1)
        .i32_sub()
        .i32_const(0)
        .local_get(2)
        .i32_sub()
        .i32_and()
        .local_tee(4)
        .local_get(3)
        .i32_add()
        .global_set(0)
        .local_get(4)
        .end();
    function
}

/// The core module wrapped into a component of `world` from the WIT text `wit`.
pub fn wrap_core_module(wit: &str, world: &str, mut module: Vec<u8>) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str("forewarn.wit", wit)
        .expect("the WIT parses");
    let world = resolve
        .select_world(&[package], Some(world))
        .expect("the world exists");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("the core module is accepted")
        .validate(true)
        .encode()
        .expect("the component encodes")
}
