//! Decoding, resizing and encoding one variant (see the crate doc).

use crate::{Error, Fit, Format, Header, Output, Spec};
use fast_image_resize::{FilterType, ResizeAlg, ResizeOptions, Resizer};
use image::{DynamicImage, ImageDecoder, RgbImage};
use std::io::Cursor;
use std::time::Instant;

/// What making a variant of one image takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The variant's size, as shown.
    pub width: u32,
    pub height: u32,
    /// The size the decoder is asked for, as stored (a JPEG's DCT scale is
    /// the smallest that covers it).
    decode: (u32, u32),
    /// Bytes decoding, resizing and encoding hold at most, besides the
    /// source itself.
    pub memory: u64,
}

/// WebP quality (libwebp's 0–100): 80 is what thumbnailers default to
/// (imgproxy, Cloudflare's `quality=85` for JPEG), about 20–40 KB for a
/// 300 px photo.
const WEBP_QUALITY: f32 = 80.0;
/// JPEG quality: WordPress's default for its sub-sizes.
const JPEG_QUALITY: u8 = 82;

/// The output size of `spec` for an image with header `h`, and what
/// making it holds. Never upscales: a box larger than the image gives the
/// image's size (with `cover`, the largest crop of the box's shape).
pub fn plan(h: &Header, spec: &Spec) -> Plan {
    let (sw, sh) = h.shown();
    let (fw, fh) = (f64::from(sw), f64::from(sh));
    let (out, scale) = match (spec.fit, spec.width, spec.height) {
        (Fit::Cover, Some(w), Some(h)) => {
            let (bw, bh) = (f64::from(w.max(1)), f64::from(h.max(1)));
            let s = (bw / fw).max(bh / fh);
            if s > 1.0 {
                ((px(bw / s), px(bh / s)), 1.0)
            } else {
                ((w.max(1), h.max(1)), s)
            }
        }
        (_, w, h) => {
            let sx = w.map_or(f64::INFINITY, |w| f64::from(w.max(1)) / fw);
            let sy = h.map_or(f64::INFINITY, |h| f64::from(h.max(1)) / fh);
            let s = sx.min(sy).min(1.0);
            ((px(fw * s), px(fh * s)), s)
        }
    };
    // The decoded size that still covers the output, as stored.
    let need = (px((fw * scale).ceil()), px((fh * scale).ceil()));
    let decode = if h.shown() == (h.width, h.height) {
        need
    } else {
        (need.1, need.0)
    };
    let memory = memory(h, decode, out);
    Plan {
        width: out.0,
        height: out.1,
        decode,
        memory,
    }
}

fn px(v: f64) -> u32 {
    (v.round() as u32).max(1)
}

/// What decoding at `decode` (as stored) and making `out` hold at most.
fn memory(h: &Header, decode: (u32, u32), out: (u32, u32)) -> u64 {
    let per = u64::from(h.channels) * u64::from(h.depth);
    let (dw, dh) = match h.format {
        Format::Jpeg => jpeg_scaled(h, decode),
        _ => (h.width, h.height),
    };
    let decoded = u64::from(dw) * u64::from(dh) * per.max(1);
    let mut sum = decoded;
    if h.format == Format::Jpeg {
        // The decoder's component planes beside the interleaved result,
        // and a progressive image's coefficients (2 bytes each, at full
        // size, in whole 16-pixel blocks).
        sum += decoded;
        if h.progressive {
            let blocks =
                u64::from(h.width.div_ceil(16) * 16) * u64::from(h.height.div_ceil(16) * 16);
            sum += blocks * 2 * u64::from(h.channels);
        }
        if h.channels == 4 {
            sum += u64::from(dw) * u64::from(dh) * 3;
        }
    }
    // The resizer's horizontal pass (out width × decoded height), its
    // output, the 8-bit copy and the encoder's buffers.
    let opx = u64::from(out.0) * u64::from(out.1);
    sum += u64::from(out.0) * u64::from(dh) * per.max(4) + opx * per.max(4);
    sum += opx * 4 * 4;
    sum + (1 << 20)
}

/// A JPEG's size at the DCT scale jpeg-decoder picks for `want`: the
/// smallest of 1/8, 1/4, 1/2 and 1 that reaches `want` on one side.
fn jpeg_scaled(h: &Header, want: (u32, u32)) -> (u32, u32) {
    let scaled = |len: u32, s: u32| (len * s).div_ceil(8);
    for s in [1, 2, 4] {
        if scaled(h.width, s) >= want.0 || scaled(h.height, s) >= want.1 {
            return (scaled(h.width, s), scaled(h.height, s));
        }
    }
    (h.width, h.height)
}

/// Makes the variant `spec` of the image `data` (whose header is `h`,
/// planned as `p`): its encoded bytes. Fails with [`Error::TimedOut`] once
/// `deadline` has passed between two steps.
pub fn make(
    data: &[u8],
    h: &Header,
    p: &Plan,
    spec: &Spec,
    deadline: Instant,
) -> Result<Vec<u8>, Error> {
    let in_time = || {
        if Instant::now() > deadline {
            Err(Error::TimedOut)
        } else {
            Ok(())
        }
    };
    let (img, orientation) = match h.format {
        Format::Jpeg => decode_jpeg(data, h, p)?,
        f => decode_other(data, f, h, p)?,
    };
    in_time()?;
    // Resized as stored, then turned: the crop is centred, so turning
    // before or after gives the same pixels, and the turn is of the small
    // image.
    let swap = matches!(orientation, 5..=8);
    let (tw, th) = if swap {
        (p.height, p.width)
    } else {
        (p.width, p.height)
    };
    let mut small = resize(&img, tw, th, spec.fit)?;
    drop(img);
    in_time()?;
    if let Some(o) = image::metadata::Orientation::from_exif(orientation) {
        small.apply_orientation(o);
    }
    let out = encode(small, spec.output)?;
    in_time()?;
    Ok(out)
}

/// A JPEG decoded at the DCT scale that covers the plan.
fn decode_jpeg(data: &[u8], h: &Header, p: &Plan) -> Result<(DynamicImage, u8), Error> {
    use jpeg_decoder::{Decoder, PixelFormat};
    let bad = |e: jpeg_decoder::Error| Error::undecodable(format!("JPEG does not decode: {e}"));
    let mut d = Decoder::new(Cursor::new(data));
    d.set_max_decoding_buffer_size(usize::try_from(p.memory).unwrap_or(usize::MAX));
    let clamp = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
    let (w, ht) = d.scale(clamp(p.decode.0), clamp(p.decode.1)).map_err(bad)?;
    let info = d
        .info()
        .ok_or_else(|| Error::undecodable("JPEG without a frame"))?;
    let pixels = d.decode().map_err(bad)?;
    let orientation = d
        .exif_data()
        .and_then(|e| crate::exif_orientation(e.strip_prefix(b"Exif\0\0").unwrap_or(e)))
        .unwrap_or(h.orientation);
    let (w, ht) = (u32::from(w), u32::from(ht));
    let short = || Error::undecodable("JPEG decoded to fewer pixels than it declares");
    let img = match info.pixel_format {
        PixelFormat::RGB24 => {
            DynamicImage::ImageRgb8(RgbImage::from_raw(w, ht, pixels).ok_or_else(short)?)
        }
        PixelFormat::L8 => {
            DynamicImage::ImageLuma8(image::GrayImage::from_raw(w, ht, pixels).ok_or_else(short)?)
        }
        PixelFormat::L16 => {
            let v: Vec<u8> = pixels.chunks_exact(2).map(|b| b[0]).collect();
            DynamicImage::ImageLuma8(image::GrayImage::from_raw(w, ht, v).ok_or_else(short)?)
        }
        PixelFormat::CMYK32 => {
            // As libjpeg hands Adobe's (inverted) CMYK: each channel
            // times K.
            let rgb: Vec<u8> = pixels
                .chunks_exact(4)
                .flat_map(|c| {
                    let k = u16::from(c[3]);
                    [0, 1, 2].map(|i| (u16::from(c[i]) * k / 255) as u8)
                })
                .collect();
            DynamicImage::ImageRgb8(RgbImage::from_raw(w, ht, rgb).ok_or_else(short)?)
        }
    };
    Ok((img, orientation))
}

/// PNG, GIF (its first frame) and WebP (the first frame of an animation)
/// through `image`, its allocations capped at the plan.
fn decode_other(data: &[u8], f: Format, h: &Header, p: &Plan) -> Result<(DynamicImage, u8), Error> {
    let name = f.name();
    let bad = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => Error::Memory(p.memory),
        e => Error::undecodable(format!("{name} does not decode: {e}")),
    };
    let fmt = match f {
        Format::Png => image::ImageFormat::Png,
        Format::Gif => image::ImageFormat::Gif,
        _ => image::ImageFormat::WebP,
    };
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(h.width);
    limits.max_image_height = Some(h.height);
    limits.max_alloc = Some(p.memory);
    let mut r = image::ImageReader::with_format(Cursor::new(data), fmt);
    r.limits(limits);
    let mut d = r.into_decoder().map_err(bad)?;
    if d.dimensions() != (h.width, h.height) {
        return Err(Error::undecodable(format!(
            "{name} declares {}×{} pixels in its header and {}×{} to its decoder",
            h.width,
            h.height,
            d.dimensions().0,
            d.dimensions().1
        )));
    }
    let orientation = d.orientation().map_or(1, |o| o.to_exif());
    let img = DynamicImage::from_decoder(d).map_err(bad)?;
    // Floating point (never from these formats today) becomes 8-bit.
    let img = match img {
        DynamicImage::ImageRgb32F(_) | DynamicImage::ImageRgba32F(_) => {
            DynamicImage::ImageRgba8(img.to_rgba8())
        }
        other => other,
    };
    Ok((img, orientation))
}

/// `img` at `w`×`h`: with `cover`, cropped around its centre to the box's
/// shape first. Lanczos3 over premultiplied alpha.
fn resize(img: &DynamicImage, w: u32, h: u32, fit: Fit) -> Result<DynamicImage, Error> {
    let mut dst = DynamicImage::new(w, h, img.color());
    let mut opts = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
    if fit == Fit::Cover {
        opts = opts.fit_into_destination(None);
    }
    if (img.width(), img.height()) == (w, h) {
        return Ok(img.clone());
    }
    Resizer::new()
        .resize(img, &mut dst, &opts)
        .map_err(|e| Error::undecodable(format!("resize: {e}")))?;
    Ok(dst)
}

fn encode(img: DynamicImage, out: Output) -> Result<Vec<u8>, Error> {
    let fail = |e: String| Error::undecodable(format!("encoding {}: {e}", out.as_str()));
    let (w, h) = (img.width(), img.height());
    match out {
        Output::WebP => {
            let m = if img.color().has_alpha() {
                let rgba = img.to_rgba8();
                webp::Encoder::from_rgba(rgba.as_raw(), w, h).encode_simple(false, WEBP_QUALITY)
            } else {
                let rgb = img.to_rgb8();
                webp::Encoder::from_rgb(rgb.as_raw(), w, h).encode_simple(false, WEBP_QUALITY)
            };
            Ok(m.map_err(|e| fail(format!("{e:?}")))?.to_vec())
        }
        Output::Jpeg => {
            let rgb = flatten(img);
            let mut v = Vec::new();
            let (w16, h16) = (u16::try_from(w), u16::try_from(h));
            let (Ok(w16), Ok(h16)) = (w16, h16) else {
                return Err(fail("over 65,535 pixels on a side".into()));
            };
            jpeg_encoder::Encoder::new(&mut v, JPEG_QUALITY)
                .encode(rgb.as_raw(), w16, h16, jpeg_encoder::ColorType::Rgb)
                .map_err(|e| fail(e.to_string()))?;
            Ok(v)
        }
        Output::Png => {
            let img = match img {
                i @ (DynamicImage::ImageLuma8(_)
                | DynamicImage::ImageLumaA8(_)
                | DynamicImage::ImageRgb8(_)
                | DynamicImage::ImageRgba8(_)) => i,
                i if i.color().has_alpha() => DynamicImage::ImageRgba8(i.to_rgba8()),
                i => DynamicImage::ImageRgb8(i.to_rgb8()),
            };
            let mut v = Vec::new();
            img.write_to(&mut Cursor::new(&mut v), image::ImageFormat::Png)
                .map_err(|e| fail(e.to_string()))?;
            Ok(v)
        }
    }
}

/// JPEG has no alpha: transparent pixels become white, as browsers show a
/// transparent image on a white page.
fn flatten(img: DynamicImage) -> RgbImage {
    if !img.color().has_alpha() {
        return img.to_rgb8();
    }
    let rgba = img.to_rgba8();
    let (w, h) = rgba.dimensions();
    let v = rgba
        .pixels()
        .flat_map(|p| {
            let a = u16::from(p[3]);
            [0, 1, 2].map(|i| ((u16::from(p[i]) * a + 255 * (255 - a)) / 255) as u8)
        })
        .collect();
    RgbImage::from_raw(w, h, v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe;

    fn spec(w: Option<u32>, h: Option<u32>, fit: Fit, output: Output) -> Spec {
        Spec {
            width: w,
            height: h,
            fit,
            output,
        }
    }

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        let img = RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        });
        let mut v = Vec::new();
        jpeg_encoder::Encoder::new(&mut v, 90)
            .encode(
                img.as_raw(),
                w as u16,
                h as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
        v
    }

    /// JPEG through jpeg-decoder (the `image` here has no JPEG decoder).
    fn decoded(v: &[u8]) -> DynamicImage {
        if v.starts_with(&[0xFF, 0xD8]) {
            let mut d = jpeg_decoder::Decoder::new(v);
            let px = d.decode().unwrap();
            let i = d.info().unwrap();
            let img = RgbImage::from_raw(i.width.into(), i.height.into(), px).unwrap();
            return DynamicImage::ImageRgb8(img);
        }
        image::load_from_memory(v).unwrap()
    }

    #[test]
    fn plans_never_upscale_and_cover_fills_the_box() {
        let h = probe(&jpeg(4000, 3000)).unwrap();
        let p = plan(&h, &spec(Some(300), Some(300), Fit::Cover, Output::WebP));
        assert_eq!((p.width, p.height), (300, 300));
        // 1/8 of 4000×3000 is 500×375, which covers 400×300.
        assert_eq!(jpeg_scaled(&h, p.decode), (500, 375));
        let p = plan(&h, &spec(Some(300), None, Fit::Contain, Output::WebP));
        assert_eq!((p.width, p.height), (300, 225));
        let p = plan(
            &h,
            &spec(Some(1024), Some(1024), Fit::Contain, Output::WebP),
        );
        assert_eq!((p.width, p.height), (1024, 768));
        let p = plan(
            &h,
            &spec(Some(8000), Some(8000), Fit::Contain, Output::WebP),
        );
        assert_eq!((p.width, p.height), (4000, 3000), "no upscale");
        let p = plan(&h, &spec(Some(6000), Some(6000), Fit::Cover, Output::WebP));
        assert_eq!((p.width, p.height), (3000, 3000), "the largest square crop");
        // Far less than the 36 MB a full decode holds.
        let p = plan(&h, &spec(Some(150), Some(150), Fit::Cover, Output::WebP));
        assert!(p.memory < 4 << 20, "{}", p.memory);
    }

    #[test]
    fn jpeg_to_each_format_at_its_size() {
        let src = jpeg(1600, 1200);
        let h = probe(&src).unwrap();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        for out in [Output::WebP, Output::Jpeg, Output::Png] {
            let s = spec(Some(150), Some(150), Fit::Cover, out);
            let p = plan(&h, &s);
            let v = make(&src, &h, &p, &s, far).unwrap();
            let img = decoded(&v);
            assert_eq!((img.width(), img.height()), (150, 150), "{out:?}");
            let magic: &[u8] = match out {
                Output::WebP => b"RIFF",
                Output::Jpeg => b"\xFF\xD8\xFF",
                Output::Png => b"\x89PNG",
            };
            assert!(v.starts_with(magic), "{out:?}");
        }
    }

    #[test]
    fn png_alpha_is_kept_in_webp_and_png_and_flattened_in_jpeg() {
        let img = image::RgbaImage::from_fn(400, 200, |x, _| {
            image::Rgba([255, 0, 0, if x < 200 { 0 } else { 255 }])
        });
        let mut src = Vec::new();
        DynamicImage::ImageRgba8(img)
            .write_to(&mut Cursor::new(&mut src), image::ImageFormat::Png)
            .unwrap();
        let h = probe(&src).unwrap();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        for out in [Output::WebP, Output::Png, Output::Jpeg] {
            let s = spec(Some(100), None, Fit::Contain, out);
            let v = make(&src, &h, &plan(&h, &s), &s, far).unwrap();
            let got = decoded(&v).to_rgba8();
            assert_eq!(got.dimensions(), (100, 50));
            let (left, right) = (got.get_pixel(10, 25), got.get_pixel(90, 25));
            if out == Output::Jpeg {
                assert!(
                    left[0] > 240 && left[1] > 240,
                    "white where transparent: {left:?}"
                );
            } else {
                assert_eq!(left[3], 0, "{out:?} keeps transparency");
            }
            assert!(
                right[3] == 255 && right[0] > 240 && right[1] < 20,
                "{out:?}: {right:?}"
            );
        }
    }

    #[test]
    fn a_truncated_jpeg_does_not_decode_and_a_passed_deadline_stops() {
        let src = jpeg(800, 600);
        let h = probe(&src).unwrap();
        let s = spec(Some(150), Some(150), Fit::Cover, Output::WebP);
        let p = plan(&h, &s);
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let e = make(&src[..src.len() / 2], &h, &p, &s, far).unwrap_err();
        assert!(matches!(e, Error::Undecodable(_)), "{e}");
        let e = make(&src, &h, &p, &s, Instant::now()).unwrap_err();
        assert_eq!(e, Error::TimedOut);
    }
}
