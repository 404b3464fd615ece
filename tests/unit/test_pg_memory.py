from ops import pg_memory

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
