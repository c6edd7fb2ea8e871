"""KIP-932 share state: the share coordinator over ``__share_group_state`` and its persister."""
