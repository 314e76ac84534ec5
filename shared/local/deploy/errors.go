package deploy

import apierrors "k8s.io/apimachinery/pkg/api/errors"

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
