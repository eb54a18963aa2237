"""Every applier, one module per operation kind; importing this package registers them all."""

from memlife.apply.appliers import (  # noqa: F401
    delete,
    erase,
    hold,
    hold_release,
    purge,
    quarantine,
    reactivate,
    restore,
    review,
    supersede,
    update,
    write,
)
