# SPDX-License-Identifier: GPL-2.0
"""Tests of use-graph.py: each way a Rust file can name another, as a tiny
crate in a temporary directory, and the cycles and layers it reports."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "use-graph.py")
_spec = importlib.util.spec_from_file_location("use_graph", SCRIPT)
use_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(use_graph)


class Crate:
    """FILES (path: text) as a crate under a temporary directory."""

    def __init__(self, files, root="lib.rs"):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir, self.root = self.tmp.name, root
        files = {root: "", **files}
        for path, text in files.items():
            full = os.path.join(self.dir, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))

    def graph(self):
        return use_graph.edges(self.dir, self.root)

    def cycles(self):
        return use_graph.cycles(self.graph())

    def run(self, *layers):
        return subprocess.run([sys.executable, SCRIPT, self.dir, self.root, *layers],
                              capture_output=True, text=True, check=False)


class CrateTest(unittest.TestCase):
    def crate(self, files):
        crate = Crate(files)
        self.addCleanup(crate.tmp.cleanup)
        return crate

    def deps(self, files, name):
        return self.crate(files).graph()[name]


class Forms(CrateTest):
    """One `use` or path form each: the files it names."""

    def test_path_before_the_brace(self):
        # The model's mr.rs: the old regex saw only `firmware`.
        files = {"firmware/mod.rs": "", "firmware/caps.rs": "", "x.rs": "",
                 "mr.rs": "use crate::firmware::{caps::LOG_RSVD_MPT, Firmware};\n"}
        self.assertEqual(self.deps(files, "mr"), {"firmware", "firmware::caps"})

    def test_brace_after_a_path_of_two(self):
        files = {"a.rs": "", "a/b.rs": "", "a/b/c.rs": "",
                 "d.rs": "use crate::a::b::{c::X, Y};\n"}
        self.assertEqual(self.deps(files, "d"), {"a::b", "a::b::c"})

    def test_nested_trees(self):
        files = {"a.rs": "", "a/b.rs": "", "a/c.rs": "", "e.rs": "",
                 "d.rs": "use crate::{a::{b::{X, Y}, c::{self}}, e::*};\n"}
        self.assertEqual(self.deps(files, "d"), {"a::b", "a::c", "e"})

    def test_as(self):
        files = {"a.rs": "", "a/b.rs": "", "d.rs": "use crate::a::b as c;\n"}
        self.assertEqual(self.deps(files, "d"), {"a::b"})

    def test_a_name_bound_by_use(self):
        # `hw` is a file, but the code names hw::cmd through it.
        files = {"hw.rs": "", "hw/cmd.rs": "", "x.rs": "",
                 "d.rs": "use crate::hw;\nfn f() { hw::cmd::exec(); }\n",
                 "e.rs": "use crate::{hw::cmd as c, x};\nfn f() { c::g(); x::h(); }\n"}
        self.assertEqual(self.deps(files, "d"), {"hw", "hw::cmd"})
        self.assertEqual(self.deps(files, "e"), {"hw::cmd", "x"})

    def test_visibility(self):
        files = {"a.rs": "", "b.rs": "", "c.rs": "",
                 "d.rs": """\
                    pub(crate) use crate::a::X;
                    pub use crate::{b::Y};
                    pub(super) use crate::c::Z;
                 """}
        self.assertEqual(self.deps(files, "d"), {"a", "b", "c"})

    def test_super_tree(self):
        files = {"a/mod.rs": "", "a/b.rs": "", "a/c.rs": "",
                 "a/d.rs": "use super::{b, c::X};\n"}
        self.assertEqual(self.deps(files, "a::d"), {"a::b", "a::c"})

    def test_super_super(self):
        files = {"a/mod.rs": "", "a/b/mod.rs": "", "a/b/c.rs": "", "a/e.rs": "",
                 "a/b/d.rs": "use super::super::e::X;\nfn f() { super::super::g(); }\n"}
        self.assertEqual(self.deps(files, "a::b::d"), {"a", "a::e"})

    def test_self_names_a_child_not_a_namesake(self):
        # x::y does not exist: `self::y` is an item of x, not the file y.rs.
        files = {"x.rs": "use self::y::Z;\nmod y { pub struct Z; }\n",
                 "y.rs": "use crate::x::W;\n"}
        crate = self.crate(files)
        self.assertEqual(crate.graph()["x"], set())
        self.assertEqual(crate.cycles(), [])

    def test_self_tree_of_children(self):
        files = {"p/mod.rs": "use self::{q::A, r::B};\n", "p/q.rs": "", "p/r.rs": ""}
        self.assertEqual(self.deps(files, "p"), set())

    def test_multi_line_tree(self):
        files = {"a.rs": "", "b.rs": "", "b/c.rs": "",
                 "d.rs": """\
                    use crate::{
                        a::X,
                        b::{
                            c::{
                                Y, // a comment with crate::nothing
                                Z,
                            },
                        },
                    };
                 """}
        self.assertEqual(self.deps(files, "d"), {"a", "b::c"})

    def test_paths_in_code(self):
        files = {"a.rs": "", "a/b.rs": "", "c.rs": "", "e.rs": "",
                 "d.rs": """\
                    fn f() -> crate::c::T {
                        crate::a::b::f();
                        let _: Vec<crate::e::U> = Vec::new();
                        crate::c::T
                    }
                 """}
        self.assertEqual(self.deps(files, "d"), {"a::b", "c", "e"})

    def test_dollar_crate_in_a_macro(self):
        files = {"a.rs": "", "d.rs": "macro_rules! m { () => { $crate::a::f() }; }\n"}
        self.assertEqual(self.deps(files, "d"), {"a"})

    def test_not_code(self):
        files = {"a.rs": "", "b.rs": "", "c.rs": "", "e.rs": "",
                 "d.rs": """\
                    //! Uses [`crate::a`].
                    /* crate::b::f() /* nested crate::c */ */
                    const S: &str = "use crate::e::X;";
                    const R: &str = r#"crate::e::"#;
                    const C: char = '{';
                    fn f<'a>(x: &'a u8) -> &'a u8 { x }
                 """}
        self.assertEqual(self.deps(files, "d"), set())

    def test_pub_in_is_not_an_edge(self):
        files = {"a/mod.rs": "", "a/b.rs": "pub(in crate::a) fn f() {}\n"}
        self.assertEqual(self.deps(files, "a::b"), set())

    def test_root_items_and_path_modules(self):
        # A name no file holds: an item of the root, or a `#[path]` module.
        files = {"d.rs": "use crate::wqe::Wqe;\nfn f() { crate::THIS_MODULE; }\n"}
        self.assertEqual(self.deps(files, "d"), {"wqe", "THIS_MODULE"})

    def test_parent_into_children_and_root(self):
        files = {"lib.rs": "use crate::a::X;\n", "a.rs": "use crate::a::b::Y;\n",
                 "a/b.rs": "use super::Z;\n"}
        graph = self.crate(files).graph()
        self.assertEqual((graph["crate"], graph["a"], graph["a::b"]), (set(), set(), {"a"}))


class Tests(CrateTest):
    """`#[cfg(test)]` code is left out, and only it."""

    def test_inline_test_module(self):
        files = {"a.rs": "", "b.rs": "",
                 "d.rs": """\
                    use crate::a::X;
                    #[cfg(test)]
                    mod tests {
                        use crate::b::{Y, Z};
                        fn t() { let s = "}"; crate::b::f(); }
                    }
                 """}
        self.assertEqual(self.deps(files, "d"), {"a"})

    def test_code_after_a_test_item_is_kept(self):
        files = {"a.rs": "", "b.rs": "",
                 "d.rs": """\
                    #[cfg(test)]
                    #[allow(dead_code)]
                    fn helper() -> [u8; 2] { crate::a::f() }
                    #[cfg(test)]
                    use crate::a::Y;
                    use crate::b::X;
                 """}
        self.assertEqual(self.deps(files, "d"), {"b"})

    def test_test_module_files(self):
        # `#[cfg(test)] mod tests;`: tests.rs and tests/ are left out.
        files = {"lib.rs": "#[cfg(test)]\nmod tests;\n", "a.rs": "",
                 "tests/mod.rs": "use crate::a::X;\n",
                 "tests/more.rs": "use crate::a::Y;\n",
                 "c/mod.rs": "#[cfg(test)]\npub(super) mod tests;\n",
                 "c/tests.rs": "use crate::a::Z;\n"}
        graph = self.crate(files).graph()
        self.assertEqual(sorted(graph), ["a", "c", "crate"])

    def test_cfg_all_test(self):
        files = {"a.rs": "", "d.rs": "#[cfg(all(test, feature = \"x\"))]\nuse crate::a::X;\n"}
        self.assertEqual(self.deps(files, "d"), set())


class Cycles(CrateTest):
    """What the script reports, and its exit code."""

    def test_the_models_cycle(self):
        crate = self.crate({
            "firmware/mod.rs": "pub mod caps;\npub struct Firmware;\n",
            "firmware/caps.rs": "use crate::keys::RESERVED_LKEY;\n",
            "keys.rs": "pub use crate::mr::{page_rest, Chunk};\n",
            "mr.rs": "use crate::firmware::{caps::LOG_RSVD_MPT, Firmware};\n",
        })
        self.assertEqual(crate.cycles(), [["firmware::caps", "keys", "mr"]])
        out = crate.run()
        self.assertEqual(out.returncode, 1)
        self.assertIn("import cycle in", out.stdout)
        self.assertIn("{firmware::caps, keys, mr}", out.stdout)

    def test_the_cores_cycle(self):
        crate = self.crate({
            "kping/mod.rs": "pub mod command;\npub mod command_error;\n",
            "kping/command.rs": "pub use super::command_error::{Error, Word};\n",
            "kping/command_error.rs": "use super::command::keywords;\n",
        })
        self.assertEqual(crate.cycles(), [["kping::command", "kping::command_error"]])

    def test_no_cycle(self):
        out = self.crate({"a.rs": "use crate::b::X;\n", "b.rs": ""}).run()
        self.assertEqual((out.returncode, out.stdout), (0, ""))

    def test_layers(self):
        crate = self.crate({"sys.rs": "use crate::hw::X;\n", "hw.rs": "use crate::sys::Y;\n",
                       "odd.rs": ""})
        out = crate.run("sys | hw | crate")
        self.assertEqual(out.returncode, 1)
        self.assertIn("layering in", out.stdout)
        self.assertIn("sys imports hw, a layer above it", out.stdout)
        self.assertIn("odd: in no layer", out.stdout)


if __name__ == "__main__":
    unittest.main()
