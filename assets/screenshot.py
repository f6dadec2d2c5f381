#!/usr/bin/env python3
"""Render a terminal screen captured with `tmux capture-pane -e -p` to PNG.

Usage: tmux capture-pane -e -p -t SESSION | python3 assets/screenshot.py COLS ROWS OUT.png
Needs: pip install pillow pyte; the DejaVu Sans Mono font (Debian fonts-dejavu-core).
This is how assets/locktop.png was made (see the README).
"""
import sys

import pyte
import pyte.graphics
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SIZE = 15
BG = (24, 24, 32)
FG = (220, 220, 220)
NAMED = {
    "black": (40, 40, 48), "red": (229, 83, 75), "green": (108, 203, 95),
    "brown": (229, 192, 75), "yellow": (229, 192, 75), "blue": (97, 161, 240),
    "magenta": (198, 120, 221), "cyan": (86, 196, 206), "white": (220, 220, 220),
    "brightblack": (78, 80, 90), "brightred": (255, 110, 100),
    "brightgreen": (140, 230, 120), "brightyellow": (255, 220, 110),
    "brightblue": (130, 180, 255), "brightmagenta": (220, 150, 240),
    "brightcyan": (120, 220, 230), "brightwhite": (255, 255, 255),
}


# tmux re-emits the 16 ANSI colours as 256-colour indexes 0-15, which
# pyte names by xterm's hex values: map them back to the palette above.
PALETTE_16 = dict(zip(
    pyte.graphics.FG_BG_256[:16],
    ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
     "brightblack", "brightred", "brightgreen", "brightyellow", "brightblue",
     "brightmagenta", "brightcyan", "brightwhite"],
))


def color(value, default):
    if value == "default":
        return default
    value = PALETTE_16.get(value, value)
    if value in NAMED:
        return NAMED[value]
    try:
        return tuple(int(value[i:i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return default


def main():
    cols, rows, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    stream.feed(sys.stdin.read().rstrip("\n").replace("\n", "\r\n"))
    font = ImageFont.truetype(FONT, SIZE)
    bold = ImageFont.truetype(BOLD, SIZE)
    cell_w = int(font.getlength("M"))
    cell_h = SIZE + 4
    pad = 12
    image = Image.new("RGB", (cols * cell_w + 2 * pad, rows * cell_h + 2 * pad), BG)
    draw = ImageDraw.Draw(image)
    for y in range(rows):
        line = screen.buffer[y]
        for x in range(cols):
            char = line[x]
            fg, bg = color(char.fg, FG), color(char.bg, BG)
            if char.reverse:
                fg, bg = bg, fg
            left, top = pad + x * cell_w, pad + y * cell_h
            if bg != BG:
                draw.rectangle([left, top, left + cell_w, top + cell_h], fill=bg)
            if char.data.strip():
                draw.text((left, top + 1), char.data, font=bold if char.bold else font, fill=fg)
    image.save(out)


if __name__ == "__main__":
    main()
