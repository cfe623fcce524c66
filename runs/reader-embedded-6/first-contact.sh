#!/bin/bash
# first contact with the sixth run as the default generator: the fifth run's questions, asked of whatever
# adapter the package holds (here the sixth run's)
exec bash "$(dirname "$0")/../reader-embedded-5/first-contact.sh"
