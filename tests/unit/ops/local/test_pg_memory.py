from ops.local import pg_memory

GB = 1 << 30


def test_auto_gives_a_quarter_and_an_eighth_of_the_ram_in_whole_gigabytes():
    assert pg_memory.shared_buffers("auto", 24 * GB) == "6GB"
    assert pg_memory.maintenance_work_mem("auto", 24 * GB) == "3GB"
    assert pg_memory.shared_buffers("auto", 10 * GB) == "2GB"  # 2.5 GB rounds down


def test_auto_is_capped_and_floored():
    assert pg_memory.shared_buffers("auto", 256 * GB) == "8GB"
    assert pg_memory.maintenance_work_mem("auto", 256 * GB) == "4GB"
    assert pg_memory.shared_buffers("auto", GB // 4) == "128MB"
    assert pg_memory.shared_buffers("auto", 2 * GB) == "512MB"


def test_an_explicit_size_is_kept():
    assert pg_memory.shared_buffers("1536MB", 24 * GB) == "1536MB"


def test_sizes_print_as_postgres_shows_them():
    assert pg_memory.pg_size(3 * GB) == "3GB"
    assert pg_memory.pg_size(1536 << 20) == "1536MB"


MEMINFO = "MemTotal:       24000000 kB\nHugePages_Total:    2700\nHugePages_Free:     2700\nHugepagesize:       2048 kB\n"


class _Conn:
    """A connection that answers the two SHOWs the status reads."""

    def __init__(self, setting: str, needed: int):
        self.answers = {"SHOW huge_pages": setting, "SHOW shared_memory_size_in_huge_pages": str(needed)}

    def execute(self, statement: str):
        value = self.answers[statement]
        return type("Cursor", (), {"fetchone": lambda self: (value,)})()


def _proc(tmp_path, meminfo: str, pid: int | None = None, hugetlb_kb: int = 0):
    (tmp_path / "meminfo").write_text(meminfo)
    if pid is not None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(f"Name:\tpostgres\nVmRSS:\t  51200 kB\nHugetlbPages:\t{hugetlb_kb} kB\n")
    return tmp_path


def test_proc_fields_are_read_by_name_with_or_without_a_unit():
    assert pg_memory.proc_kb(MEMINFO, "HugePages_Total") == 2700
    assert pg_memory.proc_kb(MEMINFO, "Hugepagesize") == 2048
    assert pg_memory.proc_kb(MEMINFO, "HugetlbPages") == 0  # absent: none


def test_a_server_on_huge_pages_is_reported_in_use(tmp_path):
    proc = _proc(tmp_path, MEMINFO, pid=41, hugetlb_kb=2629 * 2048)
    got = pg_memory.huge_pages_status(_Conn("try", 2629), 41, proc)
    assert (got.in_use, got.needed, got.reserved) == (True, 2629, 2700)
    assert got.advice.startswith("in use")


def test_too_few_reserved_pages_get_the_command_that_reserves_enough(tmp_path):
    proc = _proc(tmp_path, MEMINFO.replace("2700", "100"), pid=41)
    got = pg_memory.huge_pages_status(_Conn("try", 2629), 41, proc)
    assert got.in_use is False and got.reserved == 100
    assert "sysctl -w vm.nr_hugepages=2629" in got.advice


def test_enough_reserved_but_not_taken_asks_for_a_restart_and_off_says_so(tmp_path):
    proc = _proc(tmp_path, MEMINFO, pid=41)
    assert "restart" in pg_memory.huge_pages_status(_Conn("try", 2629), 41, proc).advice
    assert pg_memory.huge_pages_status(_Conn("off", 2629), 41, proc).advice.startswith("off")


def test_a_server_whose_process_is_not_here_is_unknown(tmp_path):
    proc = _proc(tmp_path, MEMINFO)
    got = pg_memory.huge_pages_status(_Conn("try", 2629), None, proc)
    assert got.in_use is None and got.advice.startswith("unknown")
    assert pg_memory.huge_pages_advice("try", -1, 0, False) == "not supported on this platform"
