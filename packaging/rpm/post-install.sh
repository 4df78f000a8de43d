# forewarn .rpm %post: make systemd see the unit. The service is neither enabled nor started
# (as with the .deb): with no plugin configured, forewarn would approve maintenance early.
# Configure it, add plugins, then `systemctl enable --now forewarn`.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
