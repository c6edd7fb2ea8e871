"""KIP-932 share partitions: the records a share group reads from a partition this broker leads."""
