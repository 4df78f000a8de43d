//! C bindings generation: `wit-bindgen c` as a library call.
//! Writes the header, the glue source and the component-type object for one world.
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use wit_bindgen_core::Files;
use wit_bindgen_core::wit_parser::Resolve;

/// Generates the C bindings of `world` from the WIT at `wit` into `out_dir`.
pub fn write_c_bindings(wit: &Path, world: &str, out_dir: &Path) -> Result<()> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("cannot read the WIT at {}", wit.display()))?;
    let world_id = resolve
        .select_world(&[package], Some(world))
        .with_context(|| format!("the WIT at {} has no world `{world}`", wit.display()))?;
    let mut files = Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world_id, &mut files)
        .context("generating the C bindings failed")?;
    fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create the folder {}", out_dir.display()))?;
    for (name, contents) in files.iter() {
        let path = out_dir.join(name);
        fs::write(&path, contents).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
