"""Access control lists: Kafka's ACL model, the authorizer that decides with them, and their store.

An ACL allows or denies a principal, from a host, an operation on the resources
a pattern names. ``model`` is Kafka's vocabulary for that (with its wire codes),
``authorizer`` answers the handlers' questions from ACLs held in memory (Kafka
4's ``StandardAuthorizer`` rules, with ``super.users`` and
``allow.everyone.if.no.acl.found``; ``acl_cache`` is how it finds the ACLs that
apply to a resource quickly), ``validation`` holds which ACLs and filters
CreateAcls and DeleteAcls refuse, and ``acl_store`` keeps the authorizer in step
with the ACL znodes that every broker of a cluster shares (Kafka 3's ZooKeeper
layout, ``kpybroker.metadata.acl_znodes``) and makes the writes.
"""
