"""aiokafka (asyncio client) against kpybroker."""
