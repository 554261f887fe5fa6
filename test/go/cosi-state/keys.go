package main

import (
	pgpcrypto "github.com/ProtonMail/gopenpgp/v2/crypto"
	"github.com/siderolabs/go-api-signature/pkg/pgp"
)

func pgpKeyFromArmored(armored string) (*pgp.Key, error) {
	k, err := pgpcrypto.NewKeyFromArmored(armored)
	if err != nil {
		return nil, err
	}

	return pgp.NewKey(k)
}
