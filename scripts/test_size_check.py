# SPDX-License-Identifier: GPL-2.0
"""Tests of size-check.py: long files and long functions, tests left out."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "size-check.py")
_spec = importlib.util.spec_from_file_location("size_check", SCRIPT)
size_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(size_check)


def lines(n, text="let x = 1;"):
    return "".join(f"    {text}\n" for _ in range(n))


def fn(name, body_lines):
    """A function of BODY_LINES + 2 lines."""
    return f"fn {name}() {{\n{lines(body_lines)}}}\n"


class Functions(unittest.TestCase):
    def test_length_from_fn_to_closing_brace(self):
        text = "// a\n/// doc\n#[inline]\npub(crate) fn f(\n    a: u8,\n) -> u8 {\n    a\n}\n"
        self.assertEqual(size_check.functions(text), [("f", 4, 5)])

    def test_braces_in_literals_and_comments(self):
        text = ('fn f() {\n    let s = "{{ {";\n    let c = \'{\';\n'
                '    // }\n    /* } */\n    let r = r#"}"#;\n}\nfn g() {}\n')
        self.assertEqual(size_check.functions(text), [("f", 1, 7), ("g", 8, 1)])

    def test_no_body_and_nested(self):
        text = ("trait T {\n    fn decl(&self) -> [u8; 4];\n}\n"
                "fn outer<F: Fn(u8)>(f: F) where F: Copy {\n"
                "    fn inner() {}\n    let p: fn(u8) = f;\n}\n")
        self.assertEqual(size_check.functions(text), [("outer", 4, 4), ("inner", 5, 1)])


class Tree(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.top = tmp.name

    def add(self, path, text):
        full = os.path.join(self.top, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def run_check(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], cwd=self.top,
                              capture_output=True, text=True, check=False)

    def test_files_and_functions(self):
        self.add("src/long.rs", lines(501))
        self.add("src/ok.rs", lines(500))
        # 400 lines of code, then 300 of tests.
        self.add("src/inline_tests.rs",
                 lines(400) + "#[cfg(test)]\nmod tests {\n" + lines(300) + "}\n")
        self.add("src/tests/big.rs", lines(900))
        self.add("src/tests.rs", lines(900))
        self.add("sel/big.c", lines(600, "x++;"))
        self.add("sel/big_test.c", lines(600, "x++;"))
        self.add("sel/big.mod.c", lines(600, "x++;"))
        self.add("src/target/debug/gen.rs", lines(900))
        self.add("drv/a.rs", fn("short", 78) + fn("long", 79))
        self.add("other/b.rs", fn("long_elsewhere", 200))
        out = self.run_check("src", "sel", "drv", "other", "--functions", "drv")
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stdout.splitlines(), [
            "drv/a.rs:81: fn long: 81 lines (at most 80)",
            "sel/big.c: 600 lines outside tests (at most 500)",
            "src/long.rs: 501 lines outside tests (at most 500)",
        ])

    def test_report_exits_0(self):
        self.add("src/long.rs", lines(600))
        out = self.run_check("--report", "src")
        self.assertEqual(out.returncode, 0)
        self.assertEqual(out.stdout.splitlines(),
                         ["src/long.rs: 600 lines outside tests (at most 500)",
                          "1 over the limits"])

    def test_clean(self):
        self.add("src/ok.rs", fn("f", 10))
        out = self.run_check("src", "--functions", "src")
        self.assertEqual((out.returncode, out.stdout), (0, ""))


if __name__ == "__main__":
    unittest.main()
