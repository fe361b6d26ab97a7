"""Run the quota sync as its own process: `python -m scripts.quota_sync [--once]` (= `tollway quota-sync`).

The sync itself lives in server/quota_sync.py; this is only its entry point.
"""

from server.quota_sync import main

if __name__ == "__main__":
    main()
