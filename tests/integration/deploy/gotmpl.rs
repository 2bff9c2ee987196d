//! The smallest Go text/template renderer that covers what the chart uses: text with `{{- -}}`
//! trimming and comments; `if`/`else if`/`else`, `with`/`else`, `range`/`else` (over lists
//! and maps, dot = element); `define` + `include`; pipelines with `.Field.Chains`, `$`,
//! string/number/bool literals and parenthesised sub-pipelines; and the sprig/Helm functions
//! `toYaml`, `nindent`, `indent`, `quote`, `default`, `required`, `fail`, `not`, `int`, `lt`,
//! `ne` (integers; `ne` also strings), `join` (sprig's, a list or one value) and `kindIs` (not
//! for numbers). Anything else is an
//! error, so the chart cannot drift out of this subset unnoticed. Values are JSON values
//! (as Helm's are: YAML decoded into Go's interface{}); a missing map key is nil, printed as
//! "" (Helm), and a field of nil is an error (Go).

use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
enum Arg {
    Field { dollar: bool, path: Vec<String> },
    Lit(Value),
    Func(String),
    Sub(Vec<Vec<Arg>>),
}
type Pipe = Vec<Vec<Arg>>;

#[derive(Debug)]
enum Node {
    Text(String),
    Out(Pipe),
    If(Vec<(Pipe, Vec<Node>)>, Vec<Node>),
    With(Pipe, Vec<Node>, Vec<Node>),
    Range(Pipe, Vec<Node>, Vec<Node>),
}

enum Item {
    Text(String),
    Action(String),
}

enum Stop {
    Eof,
    End,
    Else(Option<Pipe>),
}

pub struct Templates {
    files: BTreeMap<String, Vec<Node>>,
    defines: BTreeMap<String, Vec<Node>>,
}

/// Splits a template into text and actions, applying `{{- ` and ` -}}` trimming and
/// dropping comments.
fn lex(src: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    loop {
        let Some(open) = rest.find("{{") else {
            let text = if trim_next { rest.trim_start() } else { rest };
            items.push(Item::Text(text.to_string()));
            return Ok(items);
        };
        let mut text = &rest[..open];
        if trim_next {
            text = text.trim_start();
        }
        let mut after = &rest[open + 2..];
        if after.starts_with('-') && after[1..].starts_with(char::is_whitespace) {
            text = text.trim_end();
            after = &after[1..];
        }
        items.push(Item::Text(text.to_string()));
        let close = find_close(after).ok_or("unclosed action")?;
        let mut inner = &after[..close];
        trim_next = false;
        if inner.ends_with('-') && inner[..inner.len() - 1].ends_with(char::is_whitespace) {
            inner = &inner[..inner.len() - 1];
            trim_next = true;
        }
        let inner = inner.trim();
        if !(inner.starts_with("/*") && inner.ends_with("*/")) {
            items.push(Item::Action(inner.to_string()));
        }
        rest = &after[close + 2..];
    }
}

/// The offset of the `}}` that closes an action, skipping string literals.
fn find_close(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => {
                i += 1;
                while i < b.len() && b[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if b.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Bar,
    Open,
    Close,
    Str(String),
    Word(String),
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '|' => {
                chars.next();
                out.push(Tok::Bar);
            }
            '(' => {
                chars.next();
                out.push(Tok::Open);
            }
            ')' => {
                chars.next();
                out.push(Tok::Close);
            }
            '"' => {
                // Go's interpreted string literal: the escapes a chart needs.
                chars.next();
                let mut lit = String::new();
                loop {
                    match chars.next().ok_or("unterminated string")? {
                        '"' => break,
                        '\\' => match chars.next().ok_or("unterminated string")? {
                            'n' => lit.push('\n'),
                            't' => lit.push('\t'),
                            '\\' => lit.push('\\'),
                            '"' => lit.push('"'),
                            e => return Err(format!("unsupported escape \\{e}")),
                        },
                        c => lit.push(c),
                    }
                }
                out.push(Tok::Str(lit));
            }
            '`' => {
                chars.next();
                let lit: String = chars.by_ref().take_while(|&c| c != '`').collect();
                out.push(Tok::Str(lit));
            }
            _ => {
                let mut w = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "|()\"`".contains(c) {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
                out.push(Tok::Word(w));
            }
        }
    }
    Ok(out)
}

fn parse_pipe(toks: &[Tok], pos: &mut usize) -> Result<Pipe, String> {
    let mut pipe = vec![parse_cmd(toks, pos)?];
    while toks.get(*pos) == Some(&Tok::Bar) {
        *pos += 1;
        pipe.push(parse_cmd(toks, pos)?);
    }
    Ok(pipe)
}

fn parse_cmd(toks: &[Tok], pos: &mut usize) -> Result<Vec<Arg>, String> {
    let mut cmd = Vec::new();
    while let Some(t) = toks.get(*pos) {
        *pos += 1;
        cmd.push(match t {
            Tok::Bar | Tok::Close => {
                *pos -= 1;
                break;
            }
            Tok::Open => {
                let sub = parse_pipe(toks, pos)?;
                if toks.get(*pos) != Some(&Tok::Close) {
                    return Err("missing )".into());
                }
                *pos += 1;
                Arg::Sub(sub)
            }
            Tok::Str(s) => Arg::Lit(Value::String(s.clone())),
            Tok::Word(w) => word(w)?,
        });
    }
    if cmd.is_empty() {
        return Err("empty command".into());
    }
    Ok(cmd)
}

fn word(w: &str) -> Result<Arg, String> {
    let fields = |s: &str| -> Vec<String> {
        s.split('.')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    Ok(match w {
        "true" => Arg::Lit(Value::Bool(true)),
        "false" => Arg::Lit(Value::Bool(false)),
        "nil" => Arg::Lit(Value::Null),
        _ if w.starts_with('.') => Arg::Field {
            dollar: false,
            path: fields(w),
        },
        _ if w == "$" || w.starts_with("$.") => Arg::Field {
            dollar: true,
            path: fields(&w[1..]),
        },
        _ if w.starts_with('$') => return Err(format!("variables are not supported: {w}")),
        _ if w.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
            Arg::Lit(serde_json::from_str(w).map_err(|_| format!("bad number {w}"))?)
        }
        _ if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => Arg::Func(w.to_string()),
        _ => return Err(format!("bad word {w:?}")),
    })
}

fn pipe_of(s: &str) -> Result<Pipe, String> {
    let toks = tokens(s)?;
    let mut pos = 0;
    let pipe = parse_pipe(&toks, &mut pos)?;
    if pos != toks.len() {
        return Err(format!("unexpected {:?} in {s:?}", toks[pos]));
    }
    Ok(pipe)
}

struct Parser<'a> {
    items: std::slice::Iter<'a, Item>,
    defines: &'a mut BTreeMap<String, Vec<Node>>,
}

impl Parser<'_> {
    fn list(&mut self) -> Result<(Vec<Node>, Stop), String> {
        let mut nodes = Vec::new();
        while let Some(item) = self.items.next() {
            let a = match item {
                Item::Text(t) => {
                    nodes.push(Node::Text(t.clone()));
                    continue;
                }
                Item::Action(a) => a.as_str(),
            };
            let (kw, rest) = a.split_once(char::is_whitespace).unwrap_or((a, ""));
            match kw {
                "end" => return Ok((nodes, Stop::End)),
                "else" if rest.is_empty() => return Ok((nodes, Stop::Else(None))),
                "else" => {
                    let cond = rest
                        .strip_prefix("if ")
                        .ok_or(format!("unsupported {a:?}"))?;
                    return Ok((nodes, Stop::Else(Some(pipe_of(cond)?))));
                }
                "if" => {
                    let mut branches = Vec::new();
                    let mut cond = pipe_of(rest)?;
                    loop {
                        let (body, end) = self.list()?;
                        branches.push((cond, body));
                        match end {
                            Stop::Else(Some(c)) => cond = c,
                            Stop::Else(None) => {
                                let otherwise = self.closed()?;
                                nodes.push(Node::If(branches, otherwise));
                                break;
                            }
                            Stop::End => {
                                nodes.push(Node::If(branches, Vec::new()));
                                break;
                            }
                            Stop::Eof => return Err("unclosed if".into()),
                        }
                    }
                }
                "with" | "range" => {
                    let p = pipe_of(rest)?;
                    let (body, end) = self.list()?;
                    let otherwise = match end {
                        Stop::End => Vec::new(),
                        Stop::Else(None) => self.closed()?,
                        Stop::Else(Some(_)) => return Err(format!("else if in {kw}")),
                        Stop::Eof => return Err(format!("unclosed {kw}")),
                    };
                    nodes.push(if kw == "with" {
                        Node::With(p, body, otherwise)
                    } else {
                        Node::Range(p, body, otherwise)
                    });
                }
                "define" => {
                    let name = match tokens(rest)?.as_slice() {
                        [Tok::Str(name)] => name.clone(),
                        _ => return Err(format!("bad define {rest:?}")),
                    };
                    let body = self.closed()?;
                    self.defines.insert(name, body);
                }
                "template" | "block" | "break" | "continue" => {
                    return Err(format!("{kw} is not supported by this renderer"));
                }
                _ => nodes.push(Node::Out(pipe_of(a)?)),
            }
        }
        Ok((nodes, Stop::Eof))
    }

    /// A list that must end with `{{ end }}`.
    fn closed(&mut self) -> Result<Vec<Node>, String> {
        match self.list()? {
            (nodes, Stop::End) => Ok(nodes),
            _ => Err("missing {{ end }}".into()),
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

fn strval(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(String::new()),
        other => Err(format!("cannot print {other} as text")),
    }
}

/// sprig's `int` (cast.ToInt): integers as they are, floats truncated, numeric strings
/// parsed, booleans 0/1, nil and other strings 0; lists and maps are refused (Helm gives
/// 0; nothing in the chart passes one).
fn to_int(v: &Value) -> Result<i64, String> {
    Ok(match v {
        Value::Number(n) => n
            .as_i64()
            .unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64),
        Value::String(s) => s.trim().parse().unwrap_or(0),
        Value::Bool(b) => i64::from(*b),
        Value::Null => 0,
        other => return Err(format!("int: cannot convert {other}")),
    })
}

fn int(v: &Value) -> Result<usize, String> {
    v.as_u64()
        .map(|n| n as usize)
        .ok_or(format!("not a count: {v}"))
}

/// YAML for a value, as Helm's toYaml writes it: block style, keys sorted, sequences not
/// indented under their key, strings quoted when they would not read back as strings.
fn to_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let v = &m[k];
                let key = scalar(&Value::String(k.clone()));
                match v {
                    Value::Object(x) if !x.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        to_yaml(v, indent + 2, out);
                    }
                    Value::Array(x) if !x.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        to_yaml(v, indent, out);
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(v))),
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for item in a {
                let mut sub = String::new();
                to_yaml(item, indent + 2, &mut sub);
                out.push_str(&format!("{pad}- {}", &sub[indent + 2..]));
            }
        }
        _ => out.push_str(&format!("{pad}{}\n", scalar(v))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        Value::String(s) => {
            let plain = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
                && !["true", "false", "yes", "no", "on", "off", "y", "n", "null"]
                    .contains(&s.to_ascii_lowercase().as_str());
            if plain {
                s.clone()
            } else {
                Value::String(s.clone()).to_string()
            }
        }
        other => other.to_string(),
    }
}

struct Exec<'a> {
    t: &'a Templates,
    root: &'a Value,
    missing: RefCell<BTreeSet<String>>,
}

impl Exec<'_> {
    fn nodes(
        &self,
        nodes: &[Node],
        dot: &Value,
        out: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        if depth > 50 {
            return Err("include nested too deeply".into());
        }
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Out(p) => out.push_str(&strval(&self.pipe(p, dot, depth)?)?),
                Node::If(branches, otherwise) => {
                    let mut done = false;
                    for (cond, body) in branches {
                        if truthy(&self.pipe(cond, dot, depth)?) {
                            self.nodes(body, dot, out, depth)?;
                            done = true;
                            break;
                        }
                    }
                    if !done {
                        self.nodes(otherwise, dot, out, depth)?;
                    }
                }
                Node::With(p, body, otherwise) => {
                    let v = self.pipe(p, dot, depth)?;
                    if truthy(&v) {
                        self.nodes(body, &v, out, depth)?;
                    } else {
                        self.nodes(otherwise, dot, out, depth)?;
                    }
                }
                Node::Range(p, body, otherwise) => {
                    let items: Vec<Value> = match self.pipe(p, dot, depth)? {
                        Value::Array(a) => a,
                        Value::Object(m) => {
                            let sorted: BTreeMap<String, Value> = m.into_iter().collect();
                            sorted.into_values().collect()
                        }
                        Value::Null => Vec::new(),
                        other => return Err(format!("range over {other}")),
                    };
                    if items.is_empty() {
                        self.nodes(otherwise, dot, out, depth)?;
                    }
                    for item in &items {
                        self.nodes(body, item, out, depth)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn pipe(&self, pipe: &Pipe, dot: &Value, depth: usize) -> Result<Value, String> {
        let mut prev = None;
        for cmd in pipe {
            prev = Some(self.cmd(cmd, dot, prev, depth)?);
        }
        Ok(prev.unwrap_or(Value::Null))
    }

    fn cmd(
        &self,
        cmd: &[Arg],
        dot: &Value,
        piped: Option<Value>,
        depth: usize,
    ) -> Result<Value, String> {
        let Arg::Func(name) = &cmd[0] else {
            if cmd.len() > 1 || piped.is_some() {
                return Err(format!(
                    "can't give an argument to a non-function {:?}",
                    cmd[0]
                ));
            }
            return self.arg(&cmd[0], dot, depth);
        };
        let mut args = cmd[1..]
            .iter()
            .map(|a| self.arg(a, dot, depth))
            .collect::<Result<Vec<_>, _>>()?;
        args.extend(piped);
        let n = args.len();
        let arity = |want: usize| {
            if n == want {
                Ok(())
            } else {
                Err(format!("{name}: wants {want} arguments, got {n}"))
            }
        };
        Ok(match name.as_str() {
            "include" => {
                arity(2)?;
                let tname = args[0].as_str().ok_or("include: name must be a string")?;
                let body = self
                    .t
                    .defines
                    .get(tname)
                    .ok_or(format!("no template {tname:?}"))?;
                let mut out = String::new();
                self.nodes(body, &args[1], &mut out, depth + 1)?;
                Value::String(out)
            }
            "toYaml" => {
                arity(1)?;
                let mut out = String::new();
                to_yaml(&args[0], 0, &mut out);
                Value::String(out.trim_end_matches('\n').to_string())
            }
            "indent" | "nindent" => {
                arity(2)?;
                let pad = " ".repeat(int(&args[0])?);
                let s = format!(
                    "{pad}{}",
                    strval(&args[1])?.replace('\n', &format!("\n{pad}"))
                );
                Value::String(if name == "nindent" {
                    format!("\n{s}")
                } else {
                    s
                })
            }
            "quote" => {
                let quoted = args
                    .iter()
                    .filter(|a| !a.is_null())
                    .map(|a| Ok(Value::String(strval(a)?).to_string()))
                    .collect::<Result<Vec<_>, String>>()?;
                Value::String(quoted.join(" "))
            }
            "default" => {
                if n == 0 || n > 2 {
                    return Err("default: wants 1 or 2 arguments".into());
                }
                match args.get(1) {
                    Some(v) if truthy(v) => v.clone(),
                    _ => args[0].clone(),
                }
            }
            "required" => {
                arity(2)?;
                match &args[1] {
                    Value::Null => return Err(strval(&args[0])?),
                    Value::String(s) if s.is_empty() => return Err(strval(&args[0])?),
                    v => v.clone(),
                }
            }
            "fail" => {
                arity(1)?;
                return Err(strval(&args[0])?);
            }
            "not" => {
                arity(1)?;
                Value::Bool(!truthy(&args[0]))
            }
            "kindIs" => {
                arity(2)?;
                // Go's reflect kinds, but the numeric ones: a number is float64 from
                // YAML and int64 from --set in Helm, so asking for one is refused.
                let want = args[0].as_str().unwrap_or_default();
                if !["invalid", "string", "bool", "slice", "map"].contains(&want) {
                    return Err(format!("kindIs {want:?}: not in this renderer's subset"));
                }
                let kind = match &args[1] {
                    Value::Null => "invalid",
                    Value::String(_) => "string",
                    Value::Bool(_) => "bool",
                    Value::Array(_) => "slice",
                    Value::Object(_) => "map",
                    Value::Number(_) => "number",
                };
                Value::Bool(want == kind)
            }
            "int" => {
                arity(1)?;
                Value::from(to_int(&args[0])?)
            }
            "lt" | "ne" => {
                arity(2)?;
                let (a, b) = (&args[0], &args[1]);
                match (a.as_i64(), b.as_i64(), name.as_str()) {
                    (Some(a), Some(b), "lt") => Value::Bool(a < b),
                    (Some(a), Some(b), _) => Value::Bool(a != b),
                    (None, None, "ne") if a.is_string() && b.is_string() => Value::Bool(a != b),
                    _ => return Err(format!("{name}: incompatible types {a} and {b}")),
                }
            }
            "join" => {
                arity(2)?;
                let sep = args[0]
                    .as_str()
                    .ok_or("join: the separator must be a string")?;
                // sprig's strslice: a list's non-nil items, or the one value.
                let items = match &args[1] {
                    Value::Array(a) => a
                        .iter()
                        .filter(|v| !v.is_null())
                        .map(strval)
                        .collect::<Result<Vec<_>, _>>()?,
                    Value::Null => Vec::new(),
                    v => vec![strval(v)?],
                };
                Value::String(items.join(sep))
            }
            _ => {
                return Err(format!(
                    "function {name:?} not defined (not in this renderer's subset)"
                ));
            }
        })
    }

    fn arg(&self, arg: &Arg, dot: &Value, depth: usize) -> Result<Value, String> {
        match arg {
            Arg::Lit(v) => Ok(v.clone()),
            Arg::Sub(p) => self.pipe(p, dot, depth),
            Arg::Func(f) => Err(format!("function {f} used as a value")),
            Arg::Field { dollar, path } => {
                let base = if *dollar { self.root } else { dot };
                let mut cur = base.clone();
                for (i, seg) in path.iter().enumerate() {
                    cur = match cur {
                        Value::Object(mut m) => match m.remove(seg) {
                            Some(v) => v,
                            None => {
                                if std::ptr::eq(base, self.root) && path[0] == "Values" {
                                    self.missing.borrow_mut().insert(path[..=i].join("."));
                                }
                                Value::Null
                            }
                        },
                        Value::Null => {
                            return Err(format!(
                                "nil pointer evaluating .{}",
                                path[..=i].join(".")
                            ));
                        }
                        other => return Err(format!("can't evaluate field {seg} in {other}")),
                    };
                }
                Ok(cur)
            }
        }
    }
}

impl Templates {
    /// Parses every file; `define`s from all files are shared (as in Helm).
    pub fn parse(sources: &BTreeMap<String, String>) -> Result<Templates, String> {
        let mut defines = BTreeMap::new();
        let mut files = BTreeMap::new();
        for (name, src) in sources {
            let items = lex(src).map_err(|e| format!("{name}: {e}"))?;
            let mut p = Parser {
                items: items.iter(),
                defines: &mut defines,
            };
            match p.list().map_err(|e| format!("{name}: {e}"))? {
                (nodes, Stop::Eof) => {
                    files.insert(name.clone(), nodes);
                }
                _ => {
                    return Err(format!(
                        "{name}: unexpected {{{{ end }}}} or {{{{ else }}}}"
                    ));
                }
            }
        }
        Ok(Templates { files, defines })
    }

    /// Renders every file not starting with `_` (Helm's partials) with `root` as dot.
    /// Returns the outputs and the `.Values` paths read that do not exist.
    pub fn render_all(
        &self,
        root: &Value,
    ) -> Result<(BTreeMap<String, String>, BTreeSet<String>), String> {
        let exec = Exec {
            t: self,
            root,
            missing: RefCell::new(BTreeSet::new()),
        };
        let mut out = BTreeMap::new();
        for (name, nodes) in self.files.iter().filter(|(n, _)| !n.starts_with('_')) {
            let mut text = String::new();
            exec.nodes(nodes, root, &mut text, 0)
                .map_err(|e| format!("{name}: {e}"))?;
            out.insert(name.clone(), text);
        }
        Ok((out, exec.missing.into_inner()))
    }
}
