"""The package's architecture, as docs/architecture.md draws it: imports run downward."""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "trainer"
ENTRY_MODULES = {
    "trainer.task",
    "trainer.predict",
    "trainer.prepare",
    "trainer.submit",
    "trainer.export_encoder",
    "trainer.serve",
    "trainer.report",
    "trainer.export_quantized",
    "trainer.tune",
    "trainer.explain",
    "trainer.pipeline",
    "trainer.deploy",
    "trainer.evaluate",
}
# Lower numbers sit lower (docs/architecture.md, "The floors"); the longest matching prefix
# decides. A module may import its own subpackage and anything ranked below it, never above. Each
# subpackage is one floor of its own, so two of them never import each other; the top-level
# modules not named share the package's own rank, 0 (the cycle test covers them).
# The ground floor: the shared modules. Then the task kinds (config reads their registry, every
# floor above asks them what differs by task; they read labels with trainer/reading.py, the file
# reader, on the ground floor); vertex/ (the platform a job runs on: its environment, credentials,
# and the services a run reports to, which need the task registry); config (which reads both).
RANKS = {
    "trainer": 0,
    "trainer.vertex": 1,
    "trainer.config": 2,
    "trainer.modeling": 3,
    "trainer.data": 4,
    "trainer.inference": 5,
    "trainer.explaining": 6,
    "trainer.serving": 7,
    "trainer.tasks": 8,
    "trainer.reporting": 9,
    "trainer.training": 10,
    "trainer.tuning": 11,
    "trainer.cloud": 12,
}


def test_every_subpackage_has_a_floor_of_its_own():
    """Two subpackages on one floor could import each other: each gets its own."""
    subpackages = {f"trainer.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert sorted(subpackages - set(RANKS)) == []
    assert len(set(RANKS.values())) == len(RANKS)


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path) -> set:
    """Every trainer module `path` imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("trainer")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainer"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists() or (
                    PACKAGE.parent / candidate.replace(".", "/")
                ).is_dir()
                found.add(candidate if is_module else node.module)
    return found


def rank(module: str) -> int:
    if module in ENTRY_MODULES:
        return 99
    prefix = max((p for p in RANKS if module == p or module.startswith(p + ".")), key=len)
    return RANKS[prefix]


def subpackage(module: str) -> str:
    return ".".join(module.split(".")[:2])


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_downward(module):
    upward = [
        imported
        for imported in imports(MODULES[module])
        if imported in MODULES and subpackage(imported) != subpackage(module) and rank(imported) > rank(module)
    ]
    assert upward == [], f"{module} (rank {rank(module)}) imports higher modules {upward}"


def test_every_import_of_the_package_names_a_module_that_exists():
    """A module moved or removed leaves no import of its old name behind (imports inside
    functions fail only when they run)."""
    missing = {m: sorted(i for i in imports(p) if i not in MODULES and i != "trainer") for m, p in MODULES.items()}
    assert {m: found for m, found in missing.items() if found} == {}


def test_no_two_modules_outside_the_kinds_share_a_file_name():
    """A file name says what a module is, once: only the kinds' own packages repeat one (each
    kind's card.py, parts.py)."""
    kinds = {name.replace(".", "/") for name in KIND_PACKAGES}
    names = [
        path.name
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and not any(str(path.parent).endswith(kind) for kind in kinds)
    ]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_no_module_imports_an_entry_module():
    importers = {module: sorted(imports(path) & ENTRY_MODULES) for module, path in MODULES.items()}
    assert {m: found for m, found in importers.items() if found} == {}


def test_the_import_graph_has_no_cycles():
    # every module imports the package `trainer` itself first: that edge is not counted
    graph = {
        module: {i for i in imports(path) if i in MODULES and i not in (module, "trainer")}
        for module, path in MODULES.items()
    }
    assert find_cycle(graph) == []


def find_cycle(graph: dict) -> list:
    """One import cycle of `graph` ({module: the modules it imports}) as a path that ends where it
    starts, or []."""
    done, stack = set(), []

    def visit(module):
        if module in stack:
            return stack[stack.index(module) :] + [module]
        if module in done:
            return []
        stack.append(module)
        for imported in sorted(graph[module]):
            found = visit(imported)
            if found:
                return found
        stack.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        found = visit(module)
        if found:
            return found
    return []


BENCH = PACKAGE.parent / "bench"


def bench_imports(path: pathlib.Path) -> set:
    """The bench scripts `path` imports: they import each other by bare name (`from common import
    ...`), as bench/ is the script's own directory on sys.path."""
    scripts = {p.stem for p in BENCH.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found & scripts - {path.stem}


def test_find_cycle_finds_a_circle_of_two():
    assert find_cycle({"run": {"common", "serve"}, "serve": {"run"}, "common": set()}) == ["run", "serve", "run"]
    assert find_cycle({"run": {"common", "serve"}, "serve": {"common"}, "common": set()}) == []


def test_the_bench_scripts_import_each_other_without_a_cycle():
    graph = {path.stem: bench_imports(path) for path in BENCH.glob("*.py")}
    assert find_cycle(graph) == []


def test_no_bench_script_bears_the_name_of_a_library_the_trainer_imports():
    """bench/ is on sys.path in a bench script's process (and in the tests that import them): a
    script named as a library (bench/onnx.py and the onnx library) is what `import onnx` finds
    there, in the trainer's own code too."""
    libraries = {
        name.split(".")[0]
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            else []
        )
    }
    assert {path.stem for path in BENCH.glob("*.py")} & libraries == set()


def package_map() -> dict:
    """{folder: its section} of docs/architecture.md's package map: the text under each
    "### `trainer/<folder>/`" heading."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    the_map = page[page.index("## The package map") :].split("\n## ", 1)[0]
    sections = re.split(r"^### ", the_map, flags=re.M)[1:]
    return {heading.strip().strip("`"): text for heading, _, text in (section.partition("\n") for section in sections)}


PACKAGES = sorted({path.parent for path in PACKAGE.rglob("*.py")})


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_the_architecture_page_maps_every_module_under_its_folder(package):
    """docs/architecture.md's package map has a heading per folder of modules, naming each of
    its modules and subfolders: a module added, moved or renamed is a line of the map."""
    folder = f"{package.relative_to(PACKAGE.parent).as_posix()}/"
    section = package_map().get(folder)
    assert section is not None, f"docs/architecture.md's package map has no heading for {folder}"
    names = [p.name for p in package.iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    names += [f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert [name for name in sorted(names) if f"`{name}`" not in section] == [], folder


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node) -> str:
    """'a.b.c' of a Name/Attribute chain, else ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def underscore_uses(module: str, path: pathlib.Path) -> set:
    """(module, name) of every other trainer module's underscore name `path` imports, or reads
    as an attribute of a trainer module it imported."""
    tree = ast.parse(path.read_text())
    aliases, found = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainer"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if candidate in MODULES:
                    aliases[alias.asname or alias.name] = candidate
                elif _private(alias.name) and node.module != module:
                    found.add((node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            head, _, rest = _dotted(node.value).partition(".")
            owner = ".".join(filter(None, (aliases.get(head), rest))) if head in aliases else ""
            if owner in MODULES and owner != module:
                found.add((owner, node.attr))
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_uses_another_modules_underscore_name(module):
    """An underscore name is its module's own: another module that needs it needs a public name
    in the module where it belongs."""
    used = underscore_uses(module, MODULES[module])
    assert used == set(), f"{module} uses {', '.join(f'{m}.{n}' for m, n in sorted(used))}"


def task_names(path: pathlib.Path) -> list:
    """(line, name) of each string constant of `path` that is a registered task's name: what a
    comparison with a task's name, a dict keyed by one or a lookup of one is made of. A
    sentence that mentions a task (a flag's help, a message) is another constant."""
    from trainer import task_registry

    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in task_registry.names()
    ]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("trainer.tasks")))
def test_no_module_outside_tasks_names_a_task(module):
    """Everything that differs by task kind is a method or attribute of the task object
    (trainer/tasks/): a new task kind is its own folder and one line of the registry, with
    nothing to edit anywhere else."""
    assert task_names(MODULES[module]) == [], f"{module} names a task: ask the task object instead"


# The kinds' own packages (trainer/tasks/<kind>/), not what they share (parts/, units/).
KIND_PACKAGES = sorted(
    f"trainer.tasks.{p.parent.name}"
    for p in (PACKAGE / "tasks").glob("*/__init__.py")
    if p.parent.name not in ("parts", "units")
)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("trainer.tasks")))
def test_no_module_outside_tasks_imports_a_kind(module):
    """A kind is one folder (issue #67): the rest of the package reaches a kind through the
    task object (trainer.task_registry), never by importing its package."""
    found = [i for i in imports(MODULES[module]) if any(i == k or i.startswith(k + ".") for k in KIND_PACKAGES)]
    assert found == [], f"{module} imports a kind's package: ask the task object instead"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("trainer.tasks")))
def test_no_module_outside_tasks_asks_which_unit_a_task_reads(module):
    """What differs by unit (text rows, tagged sentences) is a method of the task's unit, so no
    module compares it."""
    compared = [
        node.lineno
        for node in ast.walk(ast.parse(MODULES[module].read_text()))
        if isinstance(node, ast.Compare)
        and any(isinstance(side, ast.Attribute) and side.attr == "unit" for side in (node.left, *node.comparators))
    ]
    assert compared == [], f"{module} compares a task's unit on lines {compared}: call the unit instead"


# The one place a loaded export's kind is told: it asks the kinds (trainer.task_registry.of_export).
TELLS_AN_EXPORTS_KIND = ("trainer.inference.loaded_model", "task_of reads structured_outputs")


def kind_tellers(path: pathlib.Path) -> list:
    """(line, what) of each function of `path` named as a test of a task kind (is_regression,
    is_multilabel: "is" and a task name, its hyphens and underscores dropped, in the function's
    name; a kind's name alone is a word other names hold, as word_embeddings holds embedding),
    and of each read of a serving signature's `structured_outputs` (the output names such a
    function compares: a "score", a "labels"), named by the function reading it."""
    from trainer import task_registry

    words = [name.replace("-", "") for name in task_registry.names()]
    found = []

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(f"is{word}" in node.name.replace("_", "").lower() for word in words):
                found.append((node.lineno, node.name))
            function = node.name
        elif isinstance(node, ast.Attribute) and node.attr == "structured_outputs":
            found.append((node.lineno, f"{function} reads structured_outputs"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("trainer.tasks")))
def test_no_module_outside_tasks_tells_an_exports_kind_by_its_outputs(module):
    """What trainer.predict, trainer.serve and trainer.explain answer differs by the loaded
    export's kind: inference.loaded_model.task_of asks the kinds which one it is (Task.recognizes)
    and the object answers, so no other module sniffs a signature's outputs or keeps an
    is_<kind> helper."""
    found = [(line, what) for line, what in kind_tellers(MODULES[module]) if (module, what) != TELLS_AN_EXPORTS_KIND]
    assert found == [], f"{module} tells an export's kind itself: ask predict.task_of's task object"


@pytest.mark.parametrize("template", sorted(p.name for p in (PACKAGE / "reporting" / "templates").iterdir()))
def test_no_template_names_a_task(template):
    """The report's templates neither: a task's own sections of the model card are its own
    (Task.model_card)."""
    from trainer import task_registry

    text = (PACKAGE / "reporting" / "templates" / template).read_text()
    assert [name for name in task_registry.names() if f'"{name}"' in text or f"'{name}'" in text] == []
