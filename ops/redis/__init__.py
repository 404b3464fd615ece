"""Redis as finagent's services reach it: one ACL user per role (ops/redis/acl_users.py)."""
