"""Client of tessera's lease channel for a user's own training program (docs/lease-protocol.md).

    from tessera_client import Lease
    lease = Lease(batches)
    for batch in lease:
        train(batch)
    if lease.expired:
        save_checkpoint()
    else:
        lease.complete()

Standard library only. Outside tessera (TESSERA_LEASE unset) a Lease passes everything
through, so the same program runs on its own."""

from ._channel import PROTOCOL_VERSION, LeaseError
from .files import atomic_open
from .lease import Averaged, Lease

__all__ = ["Lease", "LeaseError", "Averaged", "atomic_open", "PROTOCOL_VERSION"]
__version__ = "0.1.0"
