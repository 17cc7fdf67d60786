# SPDX-License-Identifier: Apache-2.0
"""Write a man page (roff) from a program's --help, so the page never drifts from it.

usage: manpage.py PROGRAM SECTION SUMMARY DESCRIPTION_FILE > page

SUMMARY is the NAME line's text; DESCRIPTION_FILE holds the DESCRIPTION, FILES and SEE ALSO
sections as plain paragraphs (a line "== TITLE" starts a section; blank lines split
paragraphs). From --help: the usage line is the SYNOPSIS; "keys:" entries
("  name (type, default X): what") become OPTIONS (--name=VALUE, or a line of the
-c file); "commands:" entries ("  prog cmd sub   what") become COMMANDS; other lines are
kept as paragraphs of DESCRIPTION.
"""
import re
import subprocess
import sys


def esc(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s.startswith((".", "'")) else s


def main():
    prog, section, summary, desc_file = sys.argv[1:5]
    name = prog.rsplit("/", 1)[-1]
    r = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
    text = (r.stdout + r.stderr).splitlines()
    v = subprocess.run([prog, "--version"], capture_output=True, text=True, timeout=30)
    version = (v.stdout or v.stderr).strip().split()[-1] if (v.stdout or v.stderr) else ""
    usage, keys, cmds, prose = None, [], [], []
    mode = None
    for line in text:
        if line.startswith("usage: "):
            usage = line[len("usage: "):]
            continue
        if line.strip() in ("keys:", "commands:"):
            mode = line.strip()
            continue
        m = re.match(r"^  (\S+) \((.*?)\): (.*)$", line) if mode == "keys:" else None
        if m:
            keys.append(m.groups())
            continue
        m = re.match(r"^  (\S+(?: [a-z]+)*?)\s{2,}(.*)$", line) if mode == "commands:" else None
        if m:
            cmds.append(m.groups())
            continue
        if line.strip():
            prose.append(line.strip())
    out = [f'.TH {name.upper()} {section} "" "sprocket {version}" "sprocket"',
           ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]
    if usage:
        out += [".SH SYNOPSIS", ".nf", esc(usage), ".fi"]
    sections = {"DESCRIPTION": []}
    cur = "DESCRIPTION"
    with open(desc_file) as f:
        para = []
        for line in f.read().splitlines() + [""]:
            if line.startswith("== "):
                if para:
                    sections[cur].append(" ".join(para))
                    para = []
                cur = line[3:].strip()
                sections.setdefault(cur, [])
            elif line.strip():
                para.append(line.strip())
            elif para:
                sections[cur].append(" ".join(para))
                para = []
    out.append(".SH DESCRIPTION")
    for p in sections.pop("DESCRIPTION") + prose:
        out += [".PP", esc(p)]
    if keys:
        out += [".SH OPTIONS", ".PP",
                "Every key is an option (\\fB\\-\\-key=value\\fR) and a line of the \\fB\\-c\\fR "
                "file (\\fBkey=value\\fR, RocketMQ's properties format); the command line wins."]
        for k, t, what in keys:
            out += [".TP", f"\\fB\\-\\-{esc(k)}\\fR=\\fIvalue\\fR ({esc(t)})", esc(what)]
    if cmds:
        out.append(".SH COMMANDS")
        for c, what in cmds:
            out += [".TP", f"\\fB{esc(c)}\\fR", esc(what)]
    for title, paras in sections.items():
        out.append(f".SH {esc(title)}")
        for p in paras:
            out += [".PP", esc(p)]
    print("\n".join(out))
    return 0 if usage and (keys or cmds) else 1


if __name__ == "__main__":
    sys.exit(main())
