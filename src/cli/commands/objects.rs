//! `create`, `update`, `get`, `delete` and `resize` of backends, storage classes, volumes and
//! snapshots, over the REST API; messages as tridentctl words them.

use std::io::Read;
use std::path::Path;

use crate::net::{StatusCode, Url};
use serde_json::{Value, json};

use super::client::Ctx;
use crate::cli::client_args::{
    CreateKind, CreateVolumeArgs, DeleteKind, DeleteNames, FileArg, GetKind, ResizeKind, UpdateKind,
};
use crate::cli::error::{CliError, CliResult, RestError};
use crate::cli::output::Kind;

/// How one kind of object appears in the REST API and in messages.
struct Resource {
    kind: Kind,
    /// Path segment: `/trident/v1/<path>`.
    path: &'static str,
    /// Key of the name list in `GET /<path>`.
    list_key: &'static str,
    /// Key of the object in `GET /<path>/<name>`, and of the name in the answer to a create
    /// (except for volumes, whose create answers with the backend).
    item_key: &'static str,
    /// For messages: `backend`, `storage class`, `volume`.
    word: &'static str,
    plural: &'static str,
}

const BACKEND: Resource = Resource {
    kind: Kind::Backend,
    path: "backend",
    list_key: "backends",
    item_key: "backend",
    word: "backend",
    plural: "backends",
};

const STORAGE_CLASS: Resource = Resource {
    kind: Kind::StorageClass,
    path: "storageclass",
    list_key: "storageClasses",
    item_key: "storageClass",
    word: "storage class",
    plural: "storage classes",
};

const VOLUME: Resource = Resource {
    kind: Kind::Volume,
    path: "volume",
    list_key: "volumes",
    item_key: "volume",
    word: "volume",
    plural: "volumes",
};

pub async fn create(ctx: &Ctx, kind: CreateKind) -> CliResult<()> {
    match kind {
        CreateKind::Backend(file) => {
            let doc = read_document(&file)?;
            // The seed's `nexentastor_map` file holds one backend per entry.
            let docs = match crate::drivers::nexentastor::expand_map(&doc) {
                Some(docs) => docs.map_err(|e| {
                    let shown = file.file.as_ref().map(|p| p.display().to_string());
                    CliError::Input(format!(
                        "could not parse {}: {e}",
                        shown.unwrap_or_else(|| "stdin".into())
                    ))
                })?,
                None => vec![doc],
            };
            let mut items = Vec::new();
            for doc in &docs {
                let name = add(ctx, &BACKEND, doc).await?;
                let item = get_one(ctx, &BACKEND, &name)
                    .await
                    .map_err(|e| CliError::rest(format!("could not get backend {name}"), e))?;
                items.push(item);
            }
            ctx.print(BACKEND.kind, &items)
        }
        CreateKind::StorageClass(file) => {
            let doc = read_document(&file)?;
            let name = add(ctx, &STORAGE_CLASS, &doc).await?;
            show_one(ctx, &STORAGE_CLASS, &name).await
        }
        CreateKind::Volume(args) => {
            let doc = volume_document(ctx, args).await?;
            let name = add(ctx, &VOLUME, &doc).await?;
            show_one(ctx, &VOLUME, &name).await
        }
        CreateKind::Snapshot { target } => {
            let (volume, snapshot) = split_snapshot(&target)?;
            let what = || format!("could not create snapshot {volume}/{snapshot}");
            let url = ctx.rest.url(&["volume", volume, "snapshot"]);
            let mut doc = ctx
                .rest
                .post(url.clone(), &json!({ "name": snapshot }))
                .await
                .map_err(|e| CliError::rest(what(), e))?;
            let item = take(&mut doc, "snapshot", &url).map_err(|e| CliError::rest(what(), e))?;
            ctx.print(Kind::Snapshot, &[item])
        }
    }
}

pub async fn update(ctx: &Ctx, kind: UpdateKind) -> CliResult<()> {
    let UpdateKind::Backend { names, file, state } = kind;
    let name = match names.as_slice() {
        [] => return Err(CliError::Usage("backend name not specified".into())),
        [name] => name,
        _ => return Err(CliError::Usage("multiple backend names specified".into())),
    };
    if let Some(state) = state {
        let what = || format!("could not set the state of backend {name}");
        let url = ctx.rest.url(&["backend", name, "state"]);
        let mut answer = ctx
            .rest
            .post(url.clone(), &json!({ "state": state.as_str() }))
            .await
            .map_err(|e| CliError::rest(what(), e))?;
        let item = take(&mut answer, "backend", &url).map_err(|e| CliError::rest(what(), e))?;
        return ctx.print(BACKEND.kind, &[item]);
    }
    let doc = read_document(&file)?;
    let what = || format!("could not update backend {name}");
    let url = ctx.rest.url(&["backend", name]);
    let mut answer = ctx
        .rest
        .post(url.clone(), &doc)
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    print_warnings(&answer);
    // An update may rename the backend: show it under the name the server answers with.
    let new_name =
        take_name(&mut answer, "backend", &url).map_err(|e| CliError::rest(what(), e))?;
    show_one(ctx, &BACKEND, &new_name).await
}

pub async fn get(ctx: &Ctx, kind: GetKind) -> CliResult<()> {
    match kind {
        GetKind::Backend { names } => get_objects(ctx, &BACKEND, names).await,
        GetKind::StorageClass { names } => get_objects(ctx, &STORAGE_CLASS, names).await,
        GetKind::Volume { names } => get_objects(ctx, &VOLUME, names).await,
        GetKind::Snapshot { targets } => get_snapshots(ctx, targets).await,
        GetKind::Pool { backends } => {
            let backends = fetch_objects(ctx, &BACKEND, backends).await?;
            ctx.print(Kind::Pool, &pools_of(&backends))
        }
        GetKind::Orphan => super::drift::get_orphans(ctx).await,
    }
}

/// Every pool of `backends` (in the order of the backends, then of the pool names), each as
/// the backend shows it plus the backend's name under `backend`.
fn pools_of(backends: &[Value]) -> Vec<Value> {
    let mut pools = Vec::new();
    for b in backends {
        let Some(storage) = b.get("storage").and_then(Value::as_object) else {
            continue;
        };
        for pool in storage.values() {
            let mut pool = pool.clone();
            if let Some(fields) = pool.as_object_mut() {
                fields.insert("backend".into(), b.get("name").cloned().unwrap_or_default());
            }
            pools.push(pool);
        }
    }
    pools
}

pub async fn delete(ctx: &Ctx, kind: DeleteKind) -> CliResult<()> {
    match kind {
        DeleteKind::Backend(names) => delete_objects(ctx, &BACKEND, names).await,
        DeleteKind::StorageClass(names) => delete_objects(ctx, &STORAGE_CLASS, names).await,
        DeleteKind::Volume(args) => {
            if !args.with_snapshots {
                refuse_volumes_with_snapshots(ctx, &args.names).await?;
            }
            delete_objects(ctx, &VOLUME, args.names).await
        }
        DeleteKind::Snapshot { targets } => {
            if targets.is_empty() {
                return Err(CliError::Usage("snapshot name not specified".into()));
            }
            let targets = targets
                .iter()
                .map(|t| split_snapshot(t))
                .collect::<CliResult<Vec<_>>>()?;
            for (volume, snapshot) in targets {
                let url = ctx.rest.url(&["volume", volume, "snapshot", snapshot]);
                ctx.rest.delete(url).await.map_err(|e| {
                    CliError::rest(format!("could not delete snapshot {volume}/{snapshot}"), e)
                })?;
            }
            Ok(())
        }
    }
}

pub async fn resize(ctx: &Ctx, kind: ResizeKind) -> CliResult<()> {
    let ResizeKind::Volume { name, size } = kind;
    let what = || format!("could not resize volume {name}");
    let url = ctx.rest.url(&["volume", &name, "resize"]);
    let mut doc = ctx
        .rest
        .post(url.clone(), &json!({ "size": size }))
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    let volume = take(&mut doc, "volume", &url).map_err(|e| CliError::rest(what(), e))?;
    ctx.print(Kind::Volume, &[volume])
}

/// POSTs a new object and returns its name.
async fn add(ctx: &Ctx, res: &Resource, doc: &Value) -> CliResult<String> {
    let what = || format!("could not create {}", res.word);
    let url = ctx.rest.url(&[res.path]);
    let mut answer = ctx
        .rest
        .post(url.clone(), doc)
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    print_warnings(&answer);
    if res.kind == Kind::Volume {
        // The answer names the backend; the volume is the one asked for.
        return Ok(doc["name"].as_str().unwrap_or_default().to_string());
    }
    take_name(&mut answer, res.item_key, &url).map_err(|e| CliError::rest(what(), e))
}

/// Prints the fields of the file the server ignored (Trident-shaped bodies accept unknown
/// fields and name them under `warnings`), one line each on stderr.
fn print_warnings(answer: &Value) {
    if let Some(Value::Array(warnings)) = answer.get("warnings") {
        for w in warnings.iter().filter_map(Value::as_str) {
            eprintln!("Warning: {w}");
        }
    }
}

/// GETs and prints one object (after a create or an update).
async fn show_one(ctx: &Ctx, res: &Resource, name: &str) -> CliResult<()> {
    let item = get_one(ctx, res, name)
        .await
        .map_err(|e| CliError::rest(format!("could not get {} {name}", res.word), e))?;
    ctx.print(res.kind, &[item])
}

async fn get_one(ctx: &Ctx, res: &Resource, name: &str) -> Result<Value, RestError> {
    let url = ctx.rest.url(&[res.path, name]);
    let mut doc = ctx.rest.get(url.clone()).await?;
    take(&mut doc, res.item_key, &url)
}

/// Prints the named objects, or every one.
/// Prints the objects found, then fails naming the first one that could not be had (as
/// `kubectl get a missing` prints `a` and an error for `missing`).
async fn get_objects(ctx: &Ctx, res: &Resource, names: Vec<String>) -> CliResult<()> {
    let (items, failed) = fetch_some(ctx, res, names).await?;
    if !items.is_empty() || failed.is_none() {
        ctx.print(res.kind, &items)?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The named objects, or every one when no name is given (objects deleted between the list
/// and their GET are left out).
async fn fetch_objects(ctx: &Ctx, res: &Resource, names: Vec<String>) -> CliResult<Vec<Value>> {
    match fetch_some(ctx, res, names).await? {
        (_, Some(e)) => Err(e),
        (items, None) => Ok(items),
    }
}

/// Like [`fetch_objects`], with the objects found beside the first named one that was not.
async fn fetch_some(
    ctx: &Ctx,
    res: &Resource,
    names: Vec<String>,
) -> CliResult<(Vec<Value>, Option<CliError>)> {
    let listing = names.is_empty();
    let names = if listing {
        list_names(ctx, res).await?
    } else {
        names
    };
    let mut items = Vec::with_capacity(names.len());
    let mut failed = None;
    for name in &names {
        match get_one(ctx, res, name).await {
            Ok(item) => items.push(item),
            Err(e) if listing && e.status() == Some(StatusCode::NOT_FOUND) => {}
            Err(e) if e.status() == Some(StatusCode::NOT_FOUND) => {
                failed.get_or_insert(CliError::rest(
                    format!("could not get {} {name}", res.word),
                    e,
                ));
            }
            Err(e) => {
                return Err(CliError::rest(
                    format!("could not get {} {name}", res.word),
                    e,
                ));
            }
        }
    }
    Ok((items, failed))
}

async fn list_names(ctx: &Ctx, res: &Resource) -> CliResult<Vec<String>> {
    let what = format!("could not get {}", res.plural);
    let url = ctx.rest.url(&[res.path]);
    let names = list_pages(ctx, url.clone(), res.list_key, &what).await?;
    names
        .into_iter()
        .map(|n| match n {
            Value::String(s) => Ok(s),
            other => Err(CliError::rest(
                &what,
                RestError::BadResponse {
                    url: url.to_string(),
                    detail: format!("{} is not a list of names (found {other})", res.list_key),
                },
            )),
        })
        .collect()
}

/// How many items the client asks for per page of a list.
const PAGE_SIZE: usize = 1000;

/// Every item of the list under `key` at `url`, page by page (`limit` and `continue`), so
/// that no answer is huge; a server that does not page answers everything at once.
async fn list_pages(ctx: &Ctx, url: Url, key: &str, what: &str) -> CliResult<Vec<Value>> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut page_url = url.clone();
        {
            let mut q = page_url.query_pairs_mut();
            q.append_pair("limit", &PAGE_SIZE.to_string());
            if let Some(t) = &token {
                q.append_pair("continue", t);
            }
        }
        let mut doc = ctx
            .rest
            .get(page_url.clone())
            .await
            .map_err(|e| CliError::rest(what, e))?;
        let next = match doc.get("continue") {
            Some(Value::String(t)) if Some(t) != token.as_ref() => Some(t.clone()),
            _ => None,
        };
        match take(&mut doc, key, &page_url).map_err(|e| CliError::rest(what, e))? {
            Value::Array(items) => all.extend(items),
            _ => {
                return Err(CliError::rest(
                    what,
                    RestError::BadResponse {
                        url: page_url.to_string(),
                        detail: format!("{key} is not a list"),
                    },
                ));
            }
        }
        match next {
            Some(t) => token = Some(t),
            None => return Ok(all),
        }
    }
}

/// Without `--with-snapshots`, a named volume that has snapshots stops the command before
/// anything is deleted: they would go with it silently. (`--all` says what it does.)
async fn refuse_volumes_with_snapshots(ctx: &Ctx, args: &DeleteNames) -> CliResult<()> {
    for name in &args.names {
        let url = ctx.rest.url(&["volume", name, "snapshot"]);
        let what = format!("could not delete volume {name}");
        let snapshots = match ctx.rest.get(url.clone()).await {
            Ok(mut doc) => {
                take(&mut doc, "snapshots", &url).map_err(|e| CliError::rest(&what, e))?
            }
            // A missing volume is reported by the delete itself.
            Err(e) if e.status() == Some(StatusCode::NOT_FOUND) => continue,
            Err(e) => return Err(CliError::rest(what, e)),
        };
        let names: Vec<String> = snapshots
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        if !names.is_empty() {
            return Err(CliError::Failed(format!(
                "volume {name} has {} snapshot(s) ({}), which would be deleted with it; nothing \
                 was deleted. Delete them first, or add --with-snapshots",
                names.len(),
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Deletes one by one, stopping at the first failure (as tridentctl does).
async fn delete_objects(ctx: &Ctx, res: &Resource, args: DeleteNames) -> CliResult<()> {
    let names = match (args.all, args.names.is_empty()) {
        (true, false) => {
            return Err(CliError::Usage(format!(
                "cannot use --all switch and specify individual {}",
                res.plural
            )));
        }
        (false, true) => {
            return Err(CliError::Usage(format!("{} name not specified", res.word)));
        }
        (true, true) => list_names(ctx, res).await?,
        (false, false) => args.names,
    };
    for name in &names {
        let url = ctx.rest.url(&[res.path, name]);
        ctx.rest
            .delete(url)
            .await
            .map_err(|e| CliError::rest(format!("could not delete {} {name}", res.word), e))?;
    }
    Ok(())
}

/// `get snapshot`: all, a volume's, or single ones.
async fn get_snapshots(ctx: &Ctx, targets: Vec<String>) -> CliResult<()> {
    let mut items = Vec::new();
    if targets.is_empty() {
        items = list_snapshots(ctx, ctx.rest.url(&["snapshot"]), "could not get snapshots").await?;
    }
    for target in &targets {
        match target.split_once('/') {
            None => {
                let url = ctx.rest.url(&["volume", target, "snapshot"]);
                let what = format!("could not get snapshots of volume {target}");
                items.extend(list_snapshots(ctx, url, &what).await?);
            }
            Some(_) => {
                let (volume, snapshot) = split_snapshot(target)?;
                let what = || format!("could not get snapshot {volume}/{snapshot}");
                let url = ctx.rest.url(&["volume", volume, "snapshot", snapshot]);
                let mut doc = ctx
                    .rest
                    .get(url.clone())
                    .await
                    .map_err(|e| CliError::rest(what(), e))?;
                items
                    .push(take(&mut doc, "snapshot", &url).map_err(|e| CliError::rest(what(), e))?);
            }
        }
    }
    ctx.print(Kind::Snapshot, &items)
}

async fn list_snapshots(ctx: &Ctx, url: Url, what: &str) -> CliResult<Vec<Value>> {
    list_pages(ctx, url, "snapshots", what).await
}

/// The body of `create volume`: the file's document, the name argument, and the clone source
/// (a clone of a volume takes its size unless the file gives one).
async fn volume_document(ctx: &Ctx, args: CreateVolumeArgs) -> CliResult<Value> {
    let CreateVolumeArgs {
        name,
        file,
        clone_from,
    } = args;
    let mut doc = match &file {
        Some(_) => read_document(&FileArg { file })?,
        None if clone_from.is_some() => json!({}),
        None => {
            return Err(CliError::Usage(
                "no input file was specified (use -f FILE, or --clone-from SOURCE)".into(),
            ));
        }
    };
    let obj = doc
        .as_object_mut()
        .expect("read_document returns JSON objects");
    match (name, obj.get("name").and_then(Value::as_str)) {
        (Some(arg), Some(in_file)) if !in_file.is_empty() && in_file != arg => {
            return Err(CliError::Usage(format!(
                "the volume name {arg} differs from the name {in_file} in the file"
            )));
        }
        (Some(arg), _) => {
            obj.insert("name".into(), Value::String(arg));
        }
        (None, Some(in_file)) if !in_file.is_empty() => {}
        (None, _) => return Err(CliError::Usage("volume name not specified".into())),
    }
    if let Some(source) = clone_from {
        let (volume, snapshot) = match source.split_once('/') {
            Some(_) => {
                let (v, s) = split_snapshot(&source)?;
                (v.to_string(), s.to_string())
            }
            None => (source.clone(), String::new()),
        };
        if obj
            .get("size")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let size = get_one(ctx, &VOLUME, &volume)
                .await
                .map_err(|e| CliError::rest(format!("could not get volume {volume}"), e))?
                .pointer("/Config/size")
                .cloned()
                .unwrap_or(Value::Null);
            obj.insert("size".into(), size);
        }
        obj.insert("cloneSourceVolume".into(), Value::String(volume));
        if !snapshot.is_empty() {
            obj.insert("cloneSourceSnapshot".into(), Value::String(snapshot));
        }
    }
    Ok(doc)
}

/// `VOLUME/SNAPSHOT`, both non-empty.
fn split_snapshot(target: &str) -> CliResult<(&str, &str)> {
    match target.split_once('/') {
        Some((volume, snapshot))
            if !volume.is_empty() && !snapshot.is_empty() && !snapshot.contains('/') =>
        {
            Ok((volume, snapshot))
        }
        _ => Err(CliError::Usage(format!(
            "expected VOLUME/SNAPSHOT, got {target:?}"
        ))),
    }
}

/// The `-f` file (or stdin for `-`) as a JSON object: JSON as is, YAML converted, the way
/// the server reads backend files.
fn read_document(arg: &FileArg) -> CliResult<Value> {
    let Some(path) = &arg.file else {
        return Err(CliError::Usage("no input file was specified".into()));
    };
    let (bytes, shown) = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::Input(format!("could not read stdin: {e}")))?;
        (bytes, "stdin".to_string())
    } else {
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::Input(format!("could not read {}: {e}", path.display())))?;
        (bytes, path.display().to_string())
    };
    crate::api::input::parse_backend_doc(&bytes)
        .map_err(|e| CliError::Input(format!("could not parse {shown}: {e}")))
}

/// Removes and returns `key` of an answer.
pub(super) fn take(doc: &mut Value, key: &str, url: &Url) -> Result<Value, RestError> {
    match doc.get_mut(key).map(Value::take) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(RestError::BadResponse {
            url: url.to_string(),
            detail: format!("there is no {key:?} in the answer"),
        }),
    }
}

/// A non-empty name at `key` of an answer.
fn take_name(doc: &mut Value, key: &str, url: &Url) -> Result<String, RestError> {
    match take(doc, key, url)? {
        Value::String(name) if !name.is_empty() => Ok(name),
        _ => Err(RestError::BadResponse {
            url: url.to_string(),
            detail: format!("{key:?} is not a name"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_targets() {
        assert_eq!(split_snapshot("v/s").unwrap(), ("v", "s"));
        for bad in ["v", "v/", "/s", "v/s/t", ""] {
            let e = split_snapshot(bad).unwrap_err();
            assert!(e.to_string().contains("VOLUME/SNAPSHOT"), "{e}");
        }
    }

    #[test]
    fn documents_from_json_and_yaml_files() {
        let dir = tempfile::tempdir().unwrap();
        let json_path = dir.path().join("sc.json");
        std::fs::write(
            &json_path,
            r#"{"name":"gold","attributes":{"media":"ssd"}}"#,
        )
        .unwrap();
        let yaml_path = dir.path().join("sc.yaml");
        std::fs::write(&yaml_path, "name: gold\nattributes:\n  media: ssd\n").unwrap();
        for path in [json_path, yaml_path] {
            let doc = read_document(&FileArg { file: Some(path) }).unwrap();
            assert_eq!(doc, json!({"name": "gold", "attributes": {"media": "ssd"}}));
        }
        let list = dir.path().join("list.yaml");
        std::fs::write(&list, "- a\n- b\n").unwrap();
        let e = read_document(&FileArg { file: Some(list) }).unwrap_err();
        assert!(e.to_string().contains("could not parse"), "{e}");
        let e = read_document(&FileArg {
            file: Some(dir.path().join("missing")),
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("could not read"), "{e}");
        let e = read_document(&FileArg { file: None }).unwrap_err();
        assert_eq!(e.to_string(), "no input file was specified");
    }
}
