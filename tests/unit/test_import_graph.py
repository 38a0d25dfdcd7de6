"""No import circle among Moldau's modules: the files of a package can be read, and changed, in
one order, each depending on those below it only. Every import counts, at module level, inside
functions and under TYPE_CHECKING alike (grimp, the graph import-linter checks its contracts
on). A circle is reported as the chain of imports that closes it.
"""

from __future__ import annotations

import grimp

# The packages held to it: all of Moldau (the broker's circle is gone too).
CHECKED_PACKAGES = ("moldau",)


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The sets of modules that import each other, directly or not (the strongly connected
    components of more than one module, Tarjan's algorithm without recursion), each sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        index[root] = lowest[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    index[other] = lowest[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append(
                        (other, iter(sorted(graph.find_modules_directly_imported_by(other))))
                    )
                    break
                if other in on_stack:
                    lowest[module] = min(lowest[module], index[other])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowest[parent] = min(lowest[parent], lowest[module])
                if lowest[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def describe(graph: grimp.ImportGraph, circle: list[str]) -> str:
    """One chain of imports around `circle`, back to where it starts."""
    first = circle[0]
    members = set(circle)
    for imported in sorted(graph.find_modules_directly_imported_by(first) & members):
        back = graph.find_shortest_chain(importer=imported, imported=first)
        if back is not None:
            return " -> ".join((first, *back))
    return ", ".join(circle)


def _checked(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in CHECKED_PACKAGES)


def test_no_module_of_the_checked_packages_is_in_an_import_circle() -> None:
    graph = grimp.build_graph("moldau", cache_dir=None)
    circles = [c for c in import_circles(graph) if any(_checked(m) for m in c)]
    assert not circles, "import circles:\n" + "\n".join(describe(graph, c) for c in circles)


def test_a_circle_is_found_with_the_chain_that_closes_it() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("c", "e")]:
        graph.add_import(importer=importer, imported=imported)
    circles = import_circles(graph)
    assert circles == [["a", "b", "c"]]
    assert describe(graph, circles[0]) == "a -> b -> c -> a"
