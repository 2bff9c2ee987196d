//! ZAPI wire format: a small element tree over quick-xml, the request envelope, the
//! `results` element and the errno values (docs/wire-notes.md#zapi-wire-format,
//! docs/wire-notes.md#zapi-errno-values).
//!
//! ZAPI documents are plain nested elements whose values are element text; child order does
//! not matter and unknown children are ignored. So both the driver and the simulator work on
//! one generic [`Node`] tree instead of a typed struct per call: records are read with
//! [`Node::text_at`] (`"volume-id-attributes/name"`), requests are built with the
//! [`Node::with`] builders. The DOCTYPE that real arrays send (`file:/etc/netapp_gx.dtd`) is
//! skipped; no external entity is ever resolved.

use std::fmt::Write as _;

use quick_xml::events::Event;

/// The ZAPI namespace on the root `netapp` element.
pub const NAMESPACE: &str = "http://www.netapp.com/filer/admin";

/// The ONTAPI version the driver speaks in requests (works on every ONTAP 9.x).
pub const CLIENT_VERSION: &str = "1.21";

/// One XML element: name (local part), attributes, text and children.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Node>,
}

impl Node {
    /// An empty element.
    pub fn new(name: impl Into<String>) -> Node {
        Node {
            name: name.into(),
            ..Node::default()
        }
    }

    /// An element holding only text: `<name>value</name>`.
    pub fn leaf(name: impl Into<String>, value: impl Into<String>) -> Node {
        Node {
            name: name.into(),
            text: value.into(),
            ..Node::default()
        }
    }

    /// Builder: adds a child.
    pub fn with(mut self, child: Node) -> Node {
        self.children.push(child);
        self
    }

    /// Builder: adds a text child.
    pub fn with_leaf(self, name: &str, value: impl Into<String>) -> Node {
        self.with(Node::leaf(name, value))
    }

    /// Builder: adds a text child when `value` is `Some`.
    pub fn with_opt(self, name: &str, value: Option<impl Into<String>>) -> Node {
        match value {
            Some(v) => self.with_leaf(name, v),
            None => self,
        }
    }

    /// Builder: adds an attribute.
    pub fn with_attr(mut self, name: &str, value: impl Into<String>) -> Node {
        self.attrs.push((name.to_string(), value.into()));
        self
    }

    pub fn push(&mut self, child: Node) {
        self.children.push(child);
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first child with this name.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    pub fn child_mut(&mut self, name: &str) -> Option<&mut Node> {
        self.children.iter_mut().find(|c| c.name == name)
    }

    /// Every child with this name.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The element at a `/`-separated path of child names (first match at each step).
    pub fn at(&self, path: &str) -> Option<&Node> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .try_fold(self, |n, step| n.child(step))
    }

    /// The text at a path, if the element exists.
    pub fn text_at(&self, path: &str) -> Option<&str> {
        self.at(path).map(|n| n.text.as_str())
    }

    /// The text at a path, or `""`.
    pub fn str_at(&self, path: &str) -> &str {
        self.text_at(path).unwrap_or("")
    }

    /// The text at a path parsed as an unsigned integer.
    pub fn u64_at(&self, path: &str) -> Option<u64> {
        self.text_at(path).and_then(|t| t.trim().parse().ok())
    }

    /// The text at a path parsed as a ZAPI boolean (`true`/`false`).
    pub fn bool_at(&self, path: &str) -> Option<bool> {
        match self.text_at(path).map(str::trim) {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        }
    }

    /// Texts of the repeated children of the list element at `path`.
    pub fn list_at(&self, path: &str) -> Vec<String> {
        self.at(path)
            .map(|n| n.children.iter().map(|c| c.text.clone()).collect())
            .unwrap_or_default()
    }

    /// Serialises the element (no declaration).
    pub fn to_xml(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }

    pub fn write_to(&self, out: &mut String) {
        out.push('<');
        out.push_str(&self.name);
        for (k, v) in &self.attrs {
            let _ = write!(out, " {k}=\"{}\"", escape(v));
        }
        if self.children.is_empty() && self.text.is_empty() {
            out.push_str("/>");
            return;
        }
        out.push('>');
        out.push_str(&escape(&self.text));
        for c in &self.children {
            c.write_to(out);
        }
        let _ = write!(out, "</{}>", self.name);
    }
}

/// Escapes text and attribute values (`<`, `>`, `&`, `"`, `'`).
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed XML: {0}")]
pub struct XmlError(pub String);

/// Parses a document and returns its root element. Whitespace-only text between elements is
/// dropped; the XML declaration, DOCTYPE, comments and processing instructions are skipped.
pub fn parse(doc: &str) -> Result<Node, XmlError> {
    let mut reader = quick_xml::Reader::from_str(doc);
    let mut stack: Vec<Node> = Vec::new();
    let mut root: Option<Node> = None;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| XmlError(format!("at byte {}: {e}", reader.buffer_position())))?;
        match ev {
            Event::Start(e) | Event::Empty(e) if root.is_some() => {
                let _ = e;
                return Err(XmlError("content after the root element".into()));
            }
            Event::Start(e) => stack.push(start_node(&e)?),
            Event::Empty(e) => {
                let node = start_node(&e)?;
                close(&mut stack, &mut root, node);
            }
            Event::End(e) => {
                let Some(mut node) = stack.pop() else {
                    return Err(XmlError("unexpected closing tag".into()));
                };
                if e.local_name().as_ref() != node.name {
                    return Err(XmlError(format!(
                        "closing tag {} does not match {}",
                        e.local_name().as_ref(),
                        node.name
                    )));
                }
                if !node.children.is_empty() && node.text.trim().is_empty() {
                    node.text.clear();
                }
                close(&mut stack, &mut root, node);
            }
            Event::Text(t) => {
                let content = t.xml10_content();
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&content),
                    None if content.trim().is_empty() => {}
                    None => return Err(XmlError("text outside the root element".into())),
                }
            }
            Event::CData(t) => {
                let raw = t.into_inner();
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&raw);
                }
            }
            Event::GeneralRef(r) => {
                let c = if r.is_char_ref() {
                    r.resolve_char_ref()
                        .map_err(|e| XmlError(e.to_string()))?
                        .ok_or_else(|| XmlError("bad character reference".into()))?
                        .to_string()
                } else {
                    let name = r.xml10_content();
                    match name.as_ref() {
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "amp" => "&".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => return Err(XmlError(format!("unknown entity &{other};"))),
                    }
                };
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&c);
                }
            }
            Event::Eof => break,
            Event::Decl(_) | Event::DocType(_) | Event::Comment(_) | Event::PI(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(XmlError("document ends inside an element".into()));
    }
    root.ok_or_else(|| XmlError("no root element".into()))
}

fn start_node(e: &quick_xml::events::BytesStart<'_>) -> Result<Node, XmlError> {
    let mut node = Node::new(e.local_name().as_ref());
    for a in e.attributes() {
        let a = a.map_err(|e| XmlError(e.to_string()))?;
        let key = a.key.local_name().as_ref().to_string();
        if key == "xmlns" || a.key.as_ref().starts_with("xmlns:") {
            continue;
        }
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| XmlError(e.to_string()))?;
        node.attrs.push((key, value.into_owned()));
    }
    Ok(node)
}

fn close(stack: &mut [Node], root: &mut Option<Node>, node: Node) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(node),
        None => *root = Some(node),
    }
}

/// errno values on the wire (docs/wire-notes.md#zapi-errno-values).
pub mod errno {
    pub const ENOENT: u32 = 2;
    pub const EEXIST: u32 = 17;
    pub const EINVAL: u32 = 22;
    /// No space left (used by the simulator for aggregate capacity; [unverified] on ONTAP).
    pub const ENOSPC: u32 = 28;
    pub const EVOLOPNOTSUPP: u32 = 160;
    pub const NO_SUCH_INITGROUP: u32 = 9003;
    pub const INITGROUP_EXISTS: u32 = 9004;
    pub const NODE_NOT_IN_INITGROUP: u32 = 9007;
    pub const INITGROUP_HAS_NODE: u32 = 9008;
    pub const VDISK_EXISTS: u32 = 9012;
    pub const VDISK_NOT_ENABLED: u32 = 9014;
    pub const VDISK_NOT_DISABLED: u32 = 9015;
    pub const NO_SUCH_LUNMAP: u32 = 9016;
    pub const INITGROUP_HAS_VDISK: u32 = 9023;
    pub const INITGROUP_HAS_LUN: u32 = 9024;
    pub const INITGROUP_MAPS_EXIST: u32 = 9029;
    pub const NO_SUCH_VOLUME: u32 = 9036;
    pub const SIZE_TOO_SMALL: u32 = 9041;
    pub const EAPIERROR: u32 = 13001;
    pub const EAPIPRIVILEGE: u32 = 13003;
    pub const EAPINOTFOUND: u32 = 13005;
    pub const NO_SUCH_SNAPSHOT: u32 = 13021;
    pub const ESNAPSHOTNOTALLOWED: u32 = 13023;
    pub const ESNAPSHOTBUSY: u32 = 13024;
    pub const EVOLUMEDOESNOTEXIST: u32 = 13040;
    pub const EVOLUMEOFFLINE: u32 = 13042;
    pub const EINTERNALERROR: u32 = 13114;
    pub const EINVALIDINPUTERROR: u32 = 13115;
    pub const EDUPLICATEENTRY: u32 = 13130;
    pub const EAGGRDOESNOTEXIST: u32 = 14420;
    pub const EVOL_NOT_MOUNTED: u32 = 14716;
    /// Not allowed for this vserver (e.g. a recovery-queue purge by an SVM user).
    pub const EVSERVER_OP_NOT_ALLOWED: u32 = 14719;
    pub const ESIS_CLONE_NOT_LICENSED: u32 = 14956;
    pub const EOBJECTNOTFOUND: u32 = 15661;
    pub const EVSERVERNOTFOUND: u32 = 15698;
    pub const EVOLDEL_NOT_ALLOW_BY_CLONE: u32 = 15894;
}

// ---- envelope ----

/// A request document: `<netapp xmlns=… version=… [vfiler=…]><api>…</api></netapp>`.
pub fn request(api: &Node, vfiler: Option<&str>) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let mut root = Node::new("netapp")
        .with_attr("xmlns", NAMESPACE)
        .with_attr("version", CLIENT_VERSION);
    if let Some(svm) = vfiler {
        root = root.with_attr("vfiler", svm);
    }
    root.children.push(api.clone());
    root.write_to(&mut out);
    out
}

/// A failed ZAPI result: `errno` and `reason` from the `results` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZapiFailure {
    pub errno: u32,
    pub reason: String,
}

/// Reads a response document: `Ok(results)` when `status="passed"`, `Err(Ok(failure))` when
/// failed, `Err(Err(xml error))` when the document is not a ZAPI response.
pub fn parse_response(doc: &str) -> Result<Node, Result<ZapiFailure, XmlError>> {
    let root = parse(doc).map_err(Err)?;
    if root.name != "netapp" {
        return Err(Err(XmlError(format!(
            "root element is {}, not netapp",
            root.name
        ))));
    }
    let mut results = root.children.into_iter().filter(|c| c.name == "results");
    let (Some(results), None) = (results.next(), results.next()) else {
        return Err(Err(XmlError(
            "a ZAPI response needs exactly one results element".into(),
        )));
    };
    match results.attr("status") {
        Some("passed") => Ok(results),
        Some("failed") => {
            // Attributes first; some servers put errno/reason in child elements.
            let errno = results
                .attr("errno")
                .map(str::to_string)
                .or_else(|| results.text_at("errorno").map(str::to_string))
                .unwrap_or_default();
            let reason = results
                .attr("reason")
                .map(str::to_string)
                .or_else(|| results.text_at("reason").map(str::to_string))
                .unwrap_or_default();
            Err(Ok(ZapiFailure {
                errno: errno.trim().parse().unwrap_or(0),
                reason,
            }))
        }
        other => Err(Err(XmlError(format!(
            "results status is {}",
            other.unwrap_or("missing")
        )))),
    }
}

/// The prolog real clustered ONTAP sends before the root element.
pub const RESPONSE_PROLOG: &str =
    "<?xml version='1.0' encoding='UTF-8' ?>\n<!DOCTYPE netapp SYSTEM 'file:/etc/netapp_gx.dtd'>\n";

/// A response document around a `results` element (simulator side).
pub fn response(server_version: &str, results: &Node) -> String {
    let mut out = String::from(RESPONSE_PROLOG);
    let _ = writeln!(
        out,
        "<netapp version='{server_version}' xmlns='{NAMESPACE}'>"
    );
    results.write_to(&mut out);
    out.push_str("</netapp>");
    out
}

/// A passed `results` element with the given children.
pub fn passed(children: Vec<Node>) -> Node {
    Node {
        name: "results".into(),
        attrs: vec![("status".into(), "passed".into())],
        text: String::new(),
        children,
    }
}

/// A failed `results` element.
pub fn failed(errno: u32, reason: &str) -> Node {
    Node::new("results")
        .with_attr("status", "failed")
        .with_attr("errno", errno.to_string())
        .with_attr("reason", reason)
}

// ---- iterator pages ----

/// One page of an `-iter` call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub records: Vec<Node>,
    pub next_tag: Option<String>,
    pub num_records: u64,
}

/// Reads an iterator page from a passed `results` element. `attributes-list` may be absent
/// (no match); `num-records` counts this page; `next-tag` is present while pages remain.
pub fn page(results: &Node) -> Page {
    let records = results
        .child("attributes-list")
        .map(|l| l.children.clone())
        .unwrap_or_default();
    let next_tag = results
        .text_at("next-tag")
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let num_records = results
        .u64_at("num-records")
        .unwrap_or(records.len() as u64);
    Page {
        records,
        next_tag,
        num_records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_escapes() {
        let n = Node::new("a")
            .with_attr("k", "x\"<y>")
            .with_leaf("b", "1 < 2 & 3")
            .with(Node::new("empty"));
        let xml = n.to_xml();
        let back = parse(&xml).unwrap();
        assert_eq!(back, n);
    }

    #[test]
    fn real_prolog_and_doctype_are_skipped() {
        let doc = "<?xml version='1.0' encoding='UTF-8' ?>\n<!DOCTYPE netapp SYSTEM 'file:/etc/netapp_gx.dtd'>\n<netapp version='1.180' xmlns='http://www.netapp.com/filer/admin'>\n<results status=\"passed\"><num-records>0</num-records></results></netapp>";
        let r = parse_response(doc).unwrap();
        assert_eq!(r.u64_at("num-records"), Some(0));
        assert_eq!(page(&r), Page::default());
    }

    #[test]
    fn failed_results_carry_errno_and_reason() {
        let doc = "<?xml version='1.0' encoding='UTF-8' ?><netapp version='1.180' xmlns='http://www.netapp.com/filer/admin'><results status=\"failed\" errno=\"17\" reason=\"Duplicate volume name vol_1.\"/></netapp>";
        assert_eq!(
            parse_response(doc),
            Err(Ok(ZapiFailure {
                errno: 17,
                reason: "Duplicate volume name vol_1.".into()
            }))
        );
        // Children instead of attributes (older servers).
        let doc = "<netapp><results status='failed'><errorno>13040</errorno><reason>gone</reason></results></netapp>";
        assert_eq!(
            parse_response(doc),
            Err(Ok(ZapiFailure {
                errno: 13040,
                reason: "gone".into()
            }))
        );
    }

    #[test]
    fn malformed_documents() {
        for doc in [
            "",
            "<netapp>",
            "<netapp><results status='passed'></netapp>",
            "<other/>",
            "<netapp/>",
            "<netapp><results status='passed'/><results status='passed'/></netapp>",
            "<netapp><results/></netapp>",
            "<netapp><results status='passed'>&bogus;</results></netapp>",
        ] {
            assert!(matches!(parse_response(doc), Err(Err(_))), "{doc}");
        }
    }

    #[test]
    fn next_tag_is_unescaped_text() {
        let doc = "<netapp xmlns='http://www.netapp.com/filer/admin'><results status='passed'><attributes-list><volume-attributes><volume-id-attributes><name>a</name></volume-id-attributes></volume-attributes></attributes-list><next-tag>&lt;volume-get-iter-key-td&gt;&lt;key-0&gt;svm1&lt;/key-0&gt;&lt;key-1&gt;a&lt;/key-1&gt;&lt;/volume-get-iter-key-td&gt;</next-tag><num-records>1</num-records></results></netapp>";
        let p = page(&parse_response(doc).unwrap());
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.records[0].str_at("volume-id-attributes/name"), "a");
        assert_eq!(
            p.next_tag.as_deref(),
            Some(
                "<volume-get-iter-key-td><key-0>svm1</key-0><key-1>a</key-1></volume-get-iter-key-td>"
            )
        );
        // Writing it back escapes it again.
        let req = Node::new("volume-get-iter").with_leaf("tag", p.next_tag.unwrap());
        assert!(req.to_xml().contains("&lt;volume-get-iter-key-td&gt;"));
    }

    #[test]
    fn request_envelope() {
        let api = Node::new("volume-size").with_leaf("volume", "v1");
        let doc = request(&api, Some("svm1"));
        let root = parse(&doc).unwrap();
        assert_eq!(root.name, "netapp");
        assert_eq!(root.attr("vfiler"), Some("svm1"));
        assert_eq!(root.attr("version"), Some(CLIENT_VERSION));
        assert_eq!(root.children, vec![api]);
        assert!(doc.contains(NAMESPACE));
        assert!(request(&Node::new("x"), None).find("vfiler").is_none());
    }

    #[test]
    fn accessors() {
        let n = parse("<r><a><b>7</b><t>true</t><l><x>1</x><x>2</x></l></a></r>").unwrap();
        assert_eq!(n.u64_at("a/b"), Some(7));
        assert_eq!(n.bool_at("a/t"), Some(true));
        assert_eq!(n.list_at("a/l"), vec!["1", "2"]);
        assert_eq!(n.text_at("a/missing"), None);
        assert_eq!(n.str_at("a/missing"), "");
    }
}
