# forewarn .rpm %preun: on removal ($1 = 0, not an upgrade), stop and disable the service.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now forewarn.service >/dev/null 2>&1 || :
fi
