// The test bundle's zone source: every test process reads time zones from the system's tz database
// (or $TZDIR), as the curfew and curfewd programs do, before any test runs.
void curfew_install_system_zones(void);
