"""`sample` and spindump text about the crashy fixture, as the tools lay them out: frames
at known offsets into crashy, the others named already or in Apple's images."""

from __future__ import annotations

from support.symbolication import TEXT_VMADDR

DYLD_UUID = "2B0E2D4A-4C1A-3E5B-9F0A-1D2C3B4A5E6F"
DYLD_BASE = 0x1A6EEE000
KERNEL = "kernel.release.t8101"
KERNEL_IMAGE = (
    f"     *0xfffffe0007004000 - 0xfffffe00079fffff  {KERNEL} (10002.81.5)"
    f"  <5F1E2D3C-4B5A-3968-8776-A5B4C3D2E1F0>  /System/Library/Kernels/{KERNEL}\n"
)


def sample_report(uuid: str, offsets: list[int], *, threads: int = 1) -> str:
    """`sample crashy`: each thread's tree runs dyld's start, then `offsets` (innermost,
    the pc, first) from the outermost down, every other one written with its load
    address, the others with their address alone."""
    graph = []
    for thread in range(threads):
        graph.append(
            f"    2351 Thread_{3215 + thread}   DispatchQueue_1: com.apple.main-thread  (serial)\n"
        )
        graph.append(f"    + 2351 start  (in dyld) + 520  [{DYLD_BASE + 0x5E50:#x}]\n")
        for depth, offset in enumerate(reversed(offsets)):
            pad = "  " * (depth + 1)
            mark = "+" if depth < 3 else "!"
            address = TEXT_VMADDR + offset
            where = f"  load address {TEXT_VMADDR:#x} + {offset:#x}" if depth % 2 else ""
            graph.append(f"    {mark}{pad}2351 ???  (in crashy){where}  [{address:#x}]\n")
    return (
        "Analysis of sampling crashy (pid 4711) every 1 millisecond\n"
        "Process:         crashy [4711]\n"
        "Path:            /Users/dev/crashy\n"
        f"Load Address:    {TEXT_VMADDR:#x}\n"
        "Identifier:      crashy\n"
        "Version:         ???\n"
        "Code Type:       ARM64\n"
        "Platform:        macOS\n"
        "Parent Process:  zsh [4700]\n"
        "\n"
        "Date/Time:       2024-03-04 10:11:51.498 +0100\n"
        "OS Version:      macOS 14.3 (23D56)\n"
        "Report Version:  7\n"
        "Analysis Tool:   /usr/bin/sample\n"
        "----\n"
        "\n"
        "Call graph:\n" + "".join(graph) + "\n"
        "Total number in stack (recursive counted multiple, when >=5):\n"
        "\n"
        "Sort by top of stack, same collapsed (when >= 5):\n"
        "        ???  (in crashy)        2351\n"
        "\n"
        "Binary Images:\n"
        f"       {TEXT_VMADDR:#x} -        {TEXT_VMADDR + 0x3FFF:#x} +crashy (0) "
        f"<{uuid}> /Users/dev/crashy\n"
        f"       {DYLD_BASE:#x} -        {DYLD_BASE + 0x8FFFF:#x}  dyld (1122.1) "
        f"<{DYLD_UUID}> /usr/lib/dyld\n"
    )


def spindump_process(name: str, pid: int, uuid: str, offsets: list[int], own_images: bool) -> str:
    """One process of a spindump: a thread whose tree ends in `offsets` (innermost first),
    under which the kernel's frame is the pc."""
    lines = [
        f"Process:          {name} [{pid}]\n",
        f"UUID:             {uuid}\n",
        f"Path:             /Users/dev/{name}\n",
        "Architecture:     arm64\n",
        "Parent:           launchd [1]\n",
        "Num samples:      1000 (1-1000)\n",
        "\n",
        '  Thread 0x1a2b    DispatchQueue "com.apple.main-thread"(1)    1000 samples (1-1000)'
        "    priority 46 (base 46)\n",
        f"  1000  start + 520 (dyld + 24144) [{DYLD_BASE + 0x5E50:#x}]\n",
    ]
    for depth, offset in enumerate(reversed(offsets)):
        pad = "  " * (depth + 1)
        lines.append(f"  {pad}1000  ??? ({name} + {offset}) [{TEXT_VMADDR + offset:#x}]\n")
    lines.append(
        f"  {'  ' * (len(offsets) + 1)}*1000  ??? ({KERNEL} + 12345) [0xfffffe0007a3c3c]\n"
    )
    lines.append("\n")
    if own_images:
        lines += ["  Binary Images:\n", _spin_image(name, uuid, "  "), KERNEL_IMAGE, "\n"]
    return "".join(lines)


def _spin_image(name: str, uuid: str, indent: str) -> str:
    end = TEXT_VMADDR + 0x3FFF
    return f"{indent}      {TEXT_VMADDR:#x} -        {end:#x}  {name} 1.0 (1)  <{uuid}>  /Users/dev/{name}\n"


def spindump_report(processes: list[tuple[str, int, str, list[int]]], *, shared: bool) -> str:
    """A spindump (a `.hang` when there are several processes): each process with its
    own images, or (`shared`) one list for all of them at the end."""
    header = (
        "Date/Time:        2024-03-04 10:11:51.498 +0100\n"
        "End time:         2024-03-04 10:12:01.498 +0100\n"
        "OS Version:       macOS 14.3 (Build 23D56)\n"
        "Architecture:     arm64\n"
        "Report Version:   44\n"
        "Duration:         10.00s\n"
        "Steps:            1000 (10ms sampling interval)\n"
        "\n"
    )
    body = "".join(
        spindump_process(name, pid, uuid, offsets, not shared)
        for name, pid, uuid, offsets in processes
    )
    tail = ""
    if shared:
        seen = dict.fromkeys((name, uuid) for name, _, uuid, _ in processes)
        images = "".join(_spin_image(n, u, "") for n, u in seen)
        tail = "Binary Images:\n" + images + KERNEL_IMAGE + "\n"
    return header + body + tail
