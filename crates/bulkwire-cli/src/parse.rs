//! `bulkwire parse`: streams a body through the parser, hashing each part
//! (and optionally saving it), in constant memory whatever the body size.

use crate::parse_xml::{self, Format};
use bulkwire_multipart::{Error, Limits, MultipartReader, Parser, PartInfo};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The body's Content-Type header value (with its boundary):
    /// `multipart/form-data`, `multipart/related` (MTOM/XOP), or `text/xml`
    /// for an XML-RPC call.
    #[arg(long = "content-type", short = 'c')]
    content_type: String,
    /// Body file, or `-` for standard input.
    #[arg(default_value = "-")]
    input: PathBuf,
    /// Write each part's data to DIR/<index> (never the client's filename).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Accept bare LF line ends.
    #[arg(long)]
    lenient_lf: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Overrides of [`Limits`]; the defaults are the library's. Sizes take a
/// unit (`64KiB`, `1 GiB`, `10MB`) or plain bytes.
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Most parts in one body (multipart).
    #[arg(long, value_name = "N")]
    max_parts: Option<usize>,
    /// Largest header block of one part (multipart).
    #[arg(long, value_name = "SIZE", value_parser = size::<usize>)]
    max_header_bytes: Option<usize>,
    /// Most header fields in one part (multipart).
    #[arg(long, value_name = "N")]
    max_headers: Option<usize>,
    /// Largest text field (a part without a filename; an XML-RPC string).
    #[arg(long, value_name = "SIZE", value_parser = size::<u64>)]
    max_field_bytes: Option<u64>,
    /// Most bytes before the first boundary (multipart).
    #[arg(long, value_name = "SIZE", value_parser = size::<usize>)]
    max_preamble: Option<usize>,
    /// Largest whole body.
    #[arg(long, value_name = "SIZE", value_parser = size::<u64>)]
    max_body_bytes: Option<u64>,
}

/// A `--max-*` size: `64KiB`, `1 GiB`, or plain bytes.
fn size<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let n = bulkwire_units::parse_size(s)?;
    T::try_from(n).map_err(|_| format!("{s}: too large"))
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            parts: self.max_parts.unwrap_or(d.parts),
            header_bytes: self.max_header_bytes.unwrap_or(d.header_bytes),
            headers: self.max_headers.unwrap_or(d.headers),
            field_bytes: self.max_field_bytes.unwrap_or(d.field_bytes),
            preamble: self.max_preamble.unwrap_or(d.preamble),
            body_bytes: self.max_body_bytes.unwrap_or(d.body_bytes),
            ..d
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    match parse(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_json(&e));
            ExitCode::from(1)
        }
    }
}

fn open(path: &PathBuf) -> io::Result<Box<dyn Read>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(io::stdin().lock()))
    } else {
        Ok(Box::new(File::open(path)?))
    }
}

fn parse(args: &Args) -> io::Result<()> {
    match parse_xml::format_of(&args.content_type) {
        Format::Multipart => parse_multipart(args),
        Format::Mtom => {
            let mut out = BufWriter::new(io::stdout().lock());
            parse_xml::parse_soap(&args.content_type, open(&args.input)?, &mut out)?;
            out.flush()
        }
        Format::Xml => {
            let mut out = BufWriter::new(io::stdout().lock());
            parse_xml::parse_xml(&args.content_type, open(&args.input)?, &mut out)?;
            out.flush()
        }
    }
}

fn parse_multipart(args: &Args) -> io::Result<()> {
    let mut parser = Parser::from_content_type(&args.content_type, args.limits.limits())?;
    if args.lenient_lf {
        parser = parser.allow_bare_lf();
    }
    if let Some(dir) = &args.save {
        std::fs::create_dir_all(dir)?;
    }
    let mut reader = MultipartReader::new(open(&args.input)?, parser);
    let mut out = BufWriter::new(io::stdout().lock());
    while let Some(info) = reader.next_part()? {
        let mut sink = Sink::new(args.save.as_ref().map(|d| d.join(info.index.to_string())))?;
        io::copy(&mut reader, &mut sink)?;
        let (size, sha) = sink.finish()?;
        serde_json::to_writer(&mut out, &part_json(&info, size, &sha))?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Hashes part data and optionally writes it to a file.
struct Sink {
    hash: Sha256,
    size: u64,
    file: Option<BufWriter<File>>,
}

impl Sink {
    fn new(path: Option<PathBuf>) -> io::Result<Sink> {
        let file = path.map(File::create).transpose()?.map(BufWriter::new);
        Ok(Sink {
            hash: Sha256::new(),
            size: 0,
            file,
        })
    }

    fn finish(self) -> io::Result<(u64, String)> {
        if let Some(mut f) = self.file {
            f.flush()?;
        }
        Ok((self.size, hex::encode(self.hash.finalize())))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.hash.update(buf);
        self.size += buf.len() as u64;
        if let Some(f) = &mut self.file {
            f.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn part_json(p: &PartInfo, size: u64, sha: &str) -> Value {
    let headers: Vec<[&str; 2]> = p
        .headers
        .iter()
        .map(|(k, v)| [k.as_str(), v.as_str()])
        .collect();
    json!({
        "index": p.index,
        "name": p.name,
        "filename": p.filename,
        "content_type": p.content_type,
        "content_id": p.content_id,
        "headers": headers,
        "size": size,
        "sha256": sha,
    })
}

/// The one JSON object written to stderr on failure.
fn error_json(e: &io::Error) -> Value {
    if let Some(v) = parse_xml::error_json(e) {
        return v;
    }
    match e.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
        Some(pe) => json!({
            "error": pe.kind().as_str(),
            "message": pe.to_string(),
            "offset": pe.offset(),
            "part": pe.part(),
            "limit": pe.limit_exceeded().map(|(l, v)| json!({"name": l.name(), "value": v})),
        }),
        None => json!({
            "error": "io",
            "message": e.to_string(),
            "offset": null,
            "part": null,
            "limit": null,
        }),
    }
}
