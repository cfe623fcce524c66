"""Files written safely: atomic writes (`io`) and the locks that keep one writer per folder (`locking`)."""
