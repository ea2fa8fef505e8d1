# Makes the small image files in images/ with Pillow and records in expected.json what
# diffusers' DreamBooth preprocessing gives for them (ImageOps.exif_transpose, convert("RGB"),
# torchvision's Resize(R) rule with BILINEAR or LANCZOS, optional horizontal flip, CenterCrop(R)):
# the sha256 of the cropped RGB bytes and the SDXL time_ids. pillow_test.cc checks the C++
# pipeline against it. Run with Debian 12's python3-pil (Pillow 9.4, system libjpeg-turbo and
# libwebp, the libraries the C++ decoders use): python3 make.py (in this folder).
import hashlib, json, os
from PIL import Image, ImageOps

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "images")
os.makedirs(out, exist_ok=True)

def pattern(w, h, salt=0):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 255 // max(w - 1, 1) + salt) & 255, (y * 255 // max(h - 1, 1) + 3 * salt) & 255,
                 (x * 3 + y * 5 + salt * 7) % 256) for y in range(h) for x in range(w)])
    return im

def exif(o):
    e = Image.Exif()
    e[0x0112] = o
    return e.tobytes()

files = {}
im = pattern(97, 61)
im.save(f"{out}/rotated.jpg", quality=90, exif=exif(6))
pattern(40, 52, 3).convert("CMYK").save(f"{out}/cmyk.jpg", quality=92)
pattern(45, 33, 5).convert("L").save(f"{out}/gray.jpg", quality=90, progressive=True)
pal = pattern(37, 29, 7).quantize(colors=32)
pal.info["transparency"] = 3
pal.save(f"{out}/palette.png", transparency=3)
la = pattern(30, 44, 11).convert("LA")
la.putalpha(90)
la.save(f"{out}/gray_alpha.png")
rgba = pattern(50, 30, 13).convert("RGBA")
rgba.putalpha(200)
rgba.save(f"{out}/alpha.webp", lossless=True)
pattern(64, 40, 17).save(f"{out}/lossy.webp", quality=80, exif=exif(3))
pattern(300, 200, 19).save(f"{out}/large.png")
pattern(21, 21, 23).save(f"{out}/small.jpg", quality=95)

def pipeline(path, R, flip, lanczos=False):
    image = Image.open(path)
    image = ImageOps.exif_transpose(image)
    if image.mode != "RGB":
        image = image.convert("RGB")
    orig = (image.height, image.width)
    w, h = image.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = R, int(R * long / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    if (nw, nh) != (w, h):
        image = image.resize((nw, nh), Image.LANCZOS if lanczos else Image.BILINEAR)
    if flip:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    top = int(round((image.height - R) / 2.0))
    left = int(round((image.width - R) / 2.0))
    image = image.crop((left, top, left + R, top + R))
    return hashlib.sha256(image.tobytes()).hexdigest(), list(orig) + [top, left, R, R]

result = []
for name in sorted(os.listdir(out)):
    for R, flip, lanczos in [(16, False, False), (24, True, False), (16, False, True)]:
        digest, time_ids = pipeline(f"{out}/{name}", R, flip, lanczos)
        result.append({"file": name, "resolution": R, "flip": flip, "lanczos": lanczos,
                       "sha256": digest, "time_ids": time_ids})
with open(os.path.join(here, "expected.json"), "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
