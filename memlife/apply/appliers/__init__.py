"""Every applier, one module per operation kind; importing this package registers them all."""

from memlife.apply.appliers import (  # noqa: F401
    delete,
    erase,
    hold_release,
    purge,
    quarantine,
    reactivate,
    restore,
    supersede,
    update,
    write,
)
