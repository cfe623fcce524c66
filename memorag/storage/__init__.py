"""Files written safely: atomic writes (`io`), the locks that keep one writer per folder (`locking`), and the
one folder memorag caches in (`cache_root`)."""
