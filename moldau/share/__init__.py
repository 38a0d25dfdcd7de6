"""Share groups' partition side (KIP-932): the in-flight records of each share-partition on its
leader, share sessions, and the ShareFetch/ShareAcknowledge paths through the replica manager."""
