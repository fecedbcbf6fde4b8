# SPDX-License-Identifier: GPL-2.0
"""Tests of check-doc-map.py: which files a map section names."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "check-doc-map.py")
_spec = importlib.util.spec_from_file_location("check_doc_map", SCRIPT)
check_doc_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_doc_map)

FILES = ["drv.rs", "sys.rs", "sys/mmio.rs", "hw.rs", "hw/mr.rs", "hw/cmd.rs",
         "context.rs", "context/mr.rs", "context/post.rs", "node.rs", "node/fops.rs",
         "kping/mod.rs", "kping/end.rs"]

DOC = """\
    Title
    =====

    Where things are
    ================

    ``drivers/drv/``, in layers:

    - ``sys/`` — what the kernel lacks: ``mmio.rs``.
    - ``hw/`` — the adapter: ``cmd.rs`` (the HCR), ``mr.rs``
      (MPTs).
    - ``context/`` — a context: ``context.rs`` (open), ``post.rs``,
      ``mr.rs``.
    - ``node.rs`` — the file, and ``node/fops.rs``.
    - ``kping/``: ``end.rs``.
    - The root ``drivers/drv/drv.rs``.

    Next
    ====

    ``hw/extra.rs`` is named here, outside the map.
"""


class Map(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.top = tmp.name
        self.root = os.path.join(self.top, "drivers", "drv")
        for path in FILES:
            self.add(path)

    def add(self, path):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        open(full, "w", encoding="utf-8").close()

    def missing(self, doc=DOC, title="Where things are"):
        return check_doc_map.missing(textwrap.dedent(doc), title, self.root)

    def test_every_file_named(self):
        self.assertEqual(self.missing(), [])

    def test_missing_files_listed(self):
        for path in ["hw/port.rs", "context/kernel_user.rs", "extra.rs"]:
            self.add(path)
        self.assertEqual(self.missing(), ["context/kernel_user.rs", "extra.rs", "hw/port.rs"])

    def test_a_name_belongs_to_its_items_folder(self):
        # ``mr.rs`` in the hw/ item does not name context/mr.rs.
        doc = DOC.replace("``post.rs``,\n      ``mr.rs``.", "``post.rs``.")
        self.assertEqual(self.missing(doc), ["context/mr.rs"])

    def test_a_top_level_file_in_a_folders_item(self):
        # hw/extra.rs does not exist: ``extra.rs`` is the top one.
        self.add("extra.rs")
        doc = DOC.replace("``cmd.rs`` (the HCR)", "``cmd.rs`` (the HCR, ``extra.rs``)")
        self.assertEqual(self.missing(doc), [])
        self.add("hw/extra.rs")
        self.assertEqual(self.missing(doc), ["extra.rs"])

    def test_a_folder_names_its_module(self):
        doc = DOC.replace("- ``sys/`` — what the kernel lacks: ``mmio.rs``.",
                          "- What the kernel lacks: ``sys/mmio.rs``.")
        self.assertEqual(self.missing(doc), ["sys.rs"])
        doc = DOC.replace("- ``kping/``: ``end.rs``.", "- ``kping/end.rs``.")
        self.assertEqual(self.missing(doc), ["kping/mod.rs"])

    def test_only_the_section_counts(self):
        self.add("hw/extra.rs")
        self.assertEqual(self.missing(), ["hw/extra.rs"])

    def test_no_such_section(self):
        self.assertIsNone(self.missing(title="Where things were"))

    def test_script(self):
        self.add("hw/mtt.rs")
        doc = os.path.join(self.top, "map.rst")
        with open(doc, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(DOC))
        out = subprocess.run([sys.executable, SCRIPT, doc, "Where things are", self.root],
                             capture_output=True, text=True, check=False)
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stdout.splitlines(),
                         [f"{doc}: 'Where things are' does not name {self.root}/hw/mtt.rs"])
        out = subprocess.run([sys.executable, SCRIPT, doc, "Nowhere", self.root],
                             capture_output=True, text=True, check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn("no section titled 'Nowhere'", out.stderr)


if __name__ == "__main__":
    unittest.main()
