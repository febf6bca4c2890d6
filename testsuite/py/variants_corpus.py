"""The image corpus of crates/bulkwire-server/tests/variants.rs, made with Pillow.

`make DIR [BIG]`: writes into DIR
- o1.jpg .. o8.jpg: a 1200x800 picture (as shown) stored as a camera stores
  it under each EXIF orientation (the pixels turned the other way, the tag
  saying how to turn them back), with a red square in the shown top-left
  corner and a blue one in the shown bottom-right;
- alpha.png, alpha.webp: 600x400, the left half transparent, the right half
  opaque green;
- anim.gif: 3 frames, the first red;
- with BIG: big24.jpg (6000x4000) and big12.jpg (4000x3000), a photo-like
  gradient with noise, as a 24- and a 12-megapixel camera.

`check FILE W H [alpha] [corner]`: decodes FILE (a variant), checks its size
and, with `alpha`, that its left part is transparent and its right part
opaque; with `corner`, that it is red at the top left and blue at the
bottom right. Prints the format and size.
"""

import sys

from PIL import Image, ImageDraw

# EXIF orientation -> the transpose that shows the stored pixels
# (what Pillow's ImageOps.exif_transpose applies).
SHOW = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
# Its inverse: what a camera stores for a picture shown upright.
STORE = dict(SHOW)
STORE[6] = Image.Transpose.ROTATE_90
STORE[8] = Image.Transpose.ROTATE_270


def shown():
    img = Image.new("RGB", (1200, 800), (200, 200, 200))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, 299, 299], fill=(255, 0, 0))
    d.rectangle([900, 500, 1199, 799], fill=(0, 0, 255))
    return img


def photo(w, h, seed):
    base = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    noise = Image.effect_noise((w, h), 40 + seed).convert("RGB")
    return Image.blend(base, noise, 0.35)


def make(out, big):
    for o in range(1, 9):
        img = shown()
        if o in STORE:
            img = img.transpose(STORE[o])
        exif = Image.Exif()
        exif[0x0112] = o
        img.save(f"{out}/o{o}.jpg", quality=90, exif=exif.tobytes())
    a = Image.new("RGBA", (600, 400), (0, 0, 0, 0))
    ImageDraw.Draw(a).rectangle([300, 0, 599, 399], fill=(0, 255, 0, 255))
    a.save(f"{out}/alpha.png")
    a.save(f"{out}/alpha.webp", lossless=True)
    frames = [Image.new("RGB", (120, 80), c) for c in [(255, 0, 0), (0, 255, 0), (0, 0, 255)]]
    frames[0].save(f"{out}/anim.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    if big:
        photo(6000, 4000, 1).save(f"{out}/big24.jpg", quality=92)
        photo(4000, 3000, 2).save(f"{out}/big12.jpg", quality=92)


def check(path, w, h, flags):
    img = Image.open(path)
    img.load()
    assert img.size == (w, h), f"{path}: {img.size} != {(w, h)}"
    if "alpha" in flags:
        rgba = img.convert("RGBA")
        left, right = rgba.getpixel((w // 8, h // 2)), rgba.getpixel((w - 1 - w // 8, h // 2))
        assert left[3] == 0, f"{path}: left {left} is not transparent"
        assert right[3] == 255 and right[1] > 200, f"{path}: right {right}"
    if "corner" in flags:
        rgb = img.convert("RGB")
        tl, br = rgb.getpixel((2, 2)), rgb.getpixel((w - 3, h - 3))
        assert tl[0] > 180 and tl[2] < 90, f"{path}: top left {tl} is not red"
        assert br[2] > 180 and br[0] < 90, f"{path}: bottom right {br} is not blue"
    print(img.format, img.size[0], img.size[1])


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], len(sys.argv) > 3)
    else:
        check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
