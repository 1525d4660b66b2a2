"""No import circle among the modules of faces/ and jobqueue/: data flows one way (docs/ARCHITECTURE.md §1)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def code_shape():
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "scripts" / "code_shape.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_faces_and_jobqueue_import_no_circle():
    shape = code_shape()
    graph = shape.module_imports(ROOT)
    assert {"faces.detection.clips", "jobqueue.worker"} <= set(graph), "the graph reads both packages"
    assert shape.import_circles(graph) == []


def test_a_circle_through_a_package_and_a_function_free_import_is_found(tmp_path):
    """The finder's own rules: a module-level import counts, one inside a function does not (it runs later),
    and `from package import module` names the module, not the package."""
    package = tmp_path / "faces"
    (package / "media").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "media" / "__init__.py").write_text("from faces.media import still\n")
    (package / "media" / "still.py").write_text("from faces.media import limits\nfrom faces import painters\n")
    (package / "media" / "limits.py").write_text("def late():\n    from faces.media import still\n")
    (package / "painters.py").write_text("from faces.media.still import Still\n")
    shape = code_shape()
    assert shape.import_circles(shape.module_imports(tmp_path, ("faces",))) == [["faces.media.still", "faces.painters"]]
