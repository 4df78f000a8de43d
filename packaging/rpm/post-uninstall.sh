# forewarn .rpm %postun: forget the removed unit; on an upgrade ($1 >= 1), restart the
# service if it runs, so the new binary takes over (its journal carries the events on).
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart forewarn.service >/dev/null 2>&1 || :
    fi
fi
